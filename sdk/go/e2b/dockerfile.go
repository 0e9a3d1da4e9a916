package e2b

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"time"
)

// FromDockerfile builds the template from a single-stage Dockerfile's content: its FROM is the
// base; RUN, COPY and ADD (of local files, relative to the file context), ENV, ARG, WORKDIR
// and USER become steps; CMD or ENTRYPOINT the start command (ready after 20 s). EXPOSE,
// VOLUME and other instructions are left out. The steps run as root in / unless the
// Dockerfile says otherwise, and the sandboxes' user and workdir are then user and
// /home/user, as with E2B's builder. A Dockerfile it cannot take fails the build.
func (t *Template) FromDockerfile(content string) *Template {
	lines := dockerfileLines(content)
	var from []string
	for _, l := range lines {
		if l.keyword == "FROM" {
			from = append(from, l.rest)
		}
	}
	switch len(from) {
	case 0:
		t.err = &BuildError{Message: "Dockerfile must contain a FROM instruction"}
		return t
	case 1:
	default:
		t.err = &BuildError{Message: "Multi-stage Dockerfiles are not supported"}
		return t
	}
	t.FromImage(strings.Fields(from[0])[0])
	t.SetUser("root").SetWorkdir("/")
	userSet, workdirSet := false, false
	for _, l := range lines {
		switch l.keyword {
		case "RUN":
			t.RunCmd(execForm(l.rest))
		case "COPY", "ADD":
			t.dockerCopy(l.rest)
		case "WORKDIR":
			t.SetWorkdir(l.rest)
			workdirSet = true
		case "USER":
			t.SetUser(l.rest)
			userSet = true
		case "ENV", "ARG":
			t.SetEnvs(envPairs(l.keyword, l.rest))
		case "CMD", "ENTRYPOINT":
			t.SetStartCmd(execForm(l.rest), WaitForTimeout(20*time.Second))
		}
	}
	if !userSet {
		t.SetUser("user")
	}
	if !workdirSet {
		t.SetWorkdir("/home/user")
	}
	return t
}

type dockerfileLine struct {
	keyword, rest string
}

// dockerfileLines splits a Dockerfile into instructions: continuation lines joined, comments
// and blank lines dropped.
func dockerfileLines(content string) []dockerfileLine {
	var out []dockerfileLine
	var cur strings.Builder
	flush := func() {
		s := strings.TrimSpace(cur.String())
		cur.Reset()
		if s == "" {
			return
		}
		kw, rest, _ := strings.Cut(s, " ")
		out = append(out, dockerfileLine{keyword: strings.ToUpper(kw), rest: strings.TrimSpace(rest)})
	}
	for _, line := range strings.Split(content, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSpace(strings.TrimSuffix(trimmed, "\\")) + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return out
}

// execForm turns an exec-form argument (["a","b"]) into a shell command; a shell form is
// kept as it is.
func execForm(rest string) string {
	var args []string
	if strings.HasPrefix(rest, "[") && json.Unmarshal([]byte(rest), &args) == nil {
		return strings.Join(args, " ")
	}
	return rest
}

// dockerCopy adds the Copy steps of a COPY or ADD: --chown sets the user, --chmod the mode;
// the last argument is the destination.
func (t *Template) dockerCopy(rest string) {
	var opts CopyOptions
	var args []string
	for _, f := range splitWords(execForm(rest)) {
		switch {
		case strings.HasPrefix(f, "--chown="):
			opts.User, _, _ = strings.Cut(strings.TrimPrefix(f, "--chown="), ":")
		case strings.HasPrefix(f, "--chmod="):
			var mode uint32
			fmt.Sscanf(strings.TrimPrefix(f, "--chmod="), "%o", &mode)
			opts.Mode = fs.FileMode(mode)
		case strings.HasPrefix(f, "--"):
		default:
			args = append(args, f)
		}
	}
	if len(args) < 2 {
		t.err = &BuildError{Message: "COPY needs a source and a destination: " + rest}
		return
	}
	dest := args[len(args)-1]
	for _, src := range args[:len(args)-1] {
		t.Copy(src, dest, opts)
	}
}

// envPairs reads ENV k=v [k=v...], ENV k v, ARG k=v and ARG k (an empty value).
func envPairs(keyword, rest string) map[string]string {
	words := splitWords(rest)
	out := map[string]string{}
	if len(words) > 0 && !strings.Contains(words[0], "=") {
		if keyword == "ENV" && len(words) > 1 {
			out[words[0]] = strings.Join(words[1:], " ")
		} else {
			out[words[0]] = ""
		}
		return out
	}
	for _, w := range words {
		k, v, _ := strings.Cut(w, "=")
		out[k] = v
	}
	return out
}

// splitWords splits s on blanks outside quotes and drops the quotes.
func splitWords(s string) []string {
	var words []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// ToDockerfile renders the template as the Dockerfile it stands for (a template based on
// another template has none: an error).
func (t *Template) ToDockerfile() (string, error) {
	if t.fromTemplate != "" {
		return "", &BuildError{Message: "a template based on another template cannot be a Dockerfile"}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "FROM %s\n", t.fromImage)
	for _, s := range t.steps {
		switch s.Type {
		case "RUN", "WORKDIR", "USER":
			fmt.Fprintf(&b, "%s %s\n", s.Type, s.Args[0])
		case "COPY":
			fmt.Fprintf(&b, "COPY %s %s\n", s.Args[0], s.Args[1])
		case "ENV":
			var kv []string
			for i := 0; i+1 < len(s.Args); i += 2 {
				kv = append(kv, s.Args[i]+"="+s.Args[i+1])
			}
			fmt.Fprintf(&b, "ENV %s\n", strings.Join(kv, " "))
		}
	}
	if t.startCmd != "" {
		fmt.Fprintf(&b, "ENTRYPOINT %s\n", t.startCmd)
	}
	return b.String(), nil
}

// ToJSON renders the template as the build API receives it (without the COPY steps' hashes,
// which the build computes).
func (t *Template) ToJSON() (string, error) {
	b, err := json.MarshalIndent(t.buildBody(false), "", "  ")
	return string(b), err
}
