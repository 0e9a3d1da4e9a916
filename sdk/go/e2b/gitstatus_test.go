package e2b

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseGitStatus(t *testing.T) {
	out := "## main...origin/main [ahead 2, behind 1]\nM  staged.txt\n M changed.txt\nR  old.txt -> new.txt\nUU both.txt\n?? new dir/file.txt\n"
	got := parseGitStatus(out)
	want := &GitStatus{CurrentBranch: "main", Upstream: "origin/main", Ahead: 2, Behind: 1, Files: []GitFileStatus{
		{Name: "staged.txt", Status: "modified", IndexStatus: "M", WorkingTreeStatus: " ", Staged: true},
		{Name: "changed.txt", Status: "modified", IndexStatus: " ", WorkingTreeStatus: "M"},
		{Name: "new.txt", Status: "renamed", IndexStatus: "R", WorkingTreeStatus: " ", Staged: true, RenamedFrom: "old.txt"},
		{Name: "both.txt", Status: "conflict", IndexStatus: "U", WorkingTreeStatus: "U", Staged: true},
		{Name: "new dir/file.txt", Status: "untracked", IndexStatus: "?", WorkingTreeStatus: "?"},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for line, want := range map[string]GitStatus{
		"## No commits yet on trunk":   {CurrentBranch: "trunk"},
		"## HEAD (no branch)":          {Detached: true},
		"## HEAD (detached at 1a2b3c)": {Detached: true},
	} {
		if got := parseGitStatus(line + "\n"); !cmp.Equal(*got, want) {
			t.Errorf("%q: %+v", line, got)
		}
	}
	if !parseGitStatus("").IsClean() {
		t.Error("empty output is not clean")
	}
}

func TestCredentialURL(t *testing.T) {
	if u, err := credentialURL("https://example.test/o/r.git", "me", "t0k/en"); err != nil || u != "https://me:t0k%2Fen@example.test/o/r.git" {
		t.Errorf("%s %v", u, err)
	}
	if _, err := credentialURL("git@example.test:o/r.git", "me", "tok"); err == nil {
		t.Error("credentials put in an ssh URL")
	}
	if d := repoDir("https://example.test/o/repo.git/"); d != "repo" {
		t.Errorf("repoDir = %q", d)
	}
}
