package e2b

import (
	"strconv"
	"strings"
)

// GitStatus is a repository's branch and the state of its files.
type GitStatus struct {
	CurrentBranch string // "" when detached
	Upstream      string
	Ahead, Behind int
	Detached      bool
	Files         []GitFileStatus
}

// GitFileStatus is the state of one file.
type GitFileStatus struct {
	Name string
	// Status is conflict, renamed, copied, deleted, added, modified, typechange, untracked
	// or unknown.
	Status            string
	IndexStatus       string
	WorkingTreeStatus string
	Staged            bool
	RenamedFrom       string
}

// IsClean says whether nothing changed.
func (s *GitStatus) IsClean() bool { return len(s.Files) == 0 }

// Count counts the files for which keep holds.
func (s *GitStatus) Count(keep func(GitFileStatus) bool) int {
	n := 0
	for _, f := range s.Files {
		if keep(f) {
			n++
		}
	}
	return n
}

// parseGitStatus reads `git status --porcelain=1 -b`.
func parseGitStatus(out string) *GitStatus {
	st := &GitStatus{}
	for i, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if i == 0 && strings.HasPrefix(line, "## ") {
			st.branch(line[3:])
			continue
		}
		if strings.HasPrefix(line, "?? ") {
			st.Files = append(st.Files, GitFileStatus{Name: line[3:], Status: "untracked", IndexStatus: "?", WorkingTreeStatus: "?"})
			continue
		}
		if len(line) < 4 {
			continue
		}
		f := GitFileStatus{Name: line[3:], IndexStatus: line[0:1], WorkingTreeStatus: line[1:2]}
		if from, to, ok := strings.Cut(f.Name, " -> "); ok {
			f.RenamedFrom, f.Name = from, to
		}
		f.Staged = f.IndexStatus != " " && f.IndexStatus != "?"
		f.Status = fileStatusLabel(f.IndexStatus + f.WorkingTreeStatus)
		st.Files = append(st.Files, f)
	}
	return st
}

// branch reads the "## branch...upstream [ahead 1, behind 2]" line.
func (st *GitStatus) branch(info string) {
	if i := strings.Index(info, " ["); i >= 0 {
		for _, part := range strings.Split(strings.TrimSuffix(info[i+2:], "]"), ",") {
			word, n, _ := strings.Cut(strings.TrimSpace(part), " ")
			v, _ := strconv.Atoi(n)
			switch word {
			case "ahead":
				st.Ahead = v
			case "behind":
				st.Behind = v
			}
		}
		info = info[:i]
	}
	info = strings.TrimPrefix(strings.TrimPrefix(info, "No commits yet on "), "Initial commit on ")
	if strings.HasPrefix(info, "HEAD") || strings.Contains(info, "detached") {
		st.Detached = true
		return
	}
	st.CurrentBranch, st.Upstream, _ = strings.Cut(info, "...")
}

// fileStatusLabel names the state of a file from its two status letters, the most telling
// first.
func fileStatusLabel(xy string) string {
	for _, c := range []struct{ letter, label string }{
		{"U", "conflict"}, {"R", "renamed"}, {"C", "copied"}, {"D", "deleted"}, {"A", "added"},
		{"M", "modified"}, {"T", "typechange"}, {"?", "untracked"},
	} {
		if strings.Contains(xy, c.letter) {
			return c.label
		}
	}
	return "unknown"
}
