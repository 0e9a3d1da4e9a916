package template

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
)

// ParseDockerfile turns a single-stage Dockerfile into build steps, the
// way the SDK's fromDockerfile does: steps run as root in / as in Docker,
// and the sandbox gets "user" in /home/user unless the Dockerfile sets a
// USER or WORKDIR. Every COPY (and local ADD) takes its files from the
// whole build context, uploaded once as contextHash. CMD or ENTRYPOINT
// becomes the start command. Instructions with no template equivalent
// (ARG, LABEL, EXPOSE, ...) are skipped and reported in warnings.
func ParseDockerfile(text, contextHash string) (spec BuildSpec, warnings []string, err error) {
	bad := func(line int, format string, args ...any) error {
		return sandbox.Errorf(sandbox.KindInvalid, "Dockerfile line %d: %s", line, fmt.Sprintf(format, args...))
	}
	steps := []Step{{Type: "USER", Args: []string{"root"}}, {Type: "WORKDIR", Args: []string{"/"}}}
	var setUser, setWorkdir bool
	for _, ins := range dockerfileLines(text) {
		kw, rest, _ := strings.Cut(ins.text, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(kw) {
		case "FROM":
			if spec.FromImage != "" {
				return BuildSpec{}, nil, bad(ins.line, "multi-stage Dockerfiles are not supported")
			}
			f := strings.Fields(rest)
			if len(f) == 0 || strings.HasPrefix(f[0], "--") {
				return BuildSpec{}, nil, bad(ins.line, "expected FROM image")
			}
			spec.FromImage = f[0]
		case "RUN":
			steps = append(steps, Step{Type: "RUN", Args: []string{shellOrExec(rest)}})
		case "COPY", "ADD":
			words := shellWords(rest)
			var chown, chmod string
			for len(words) > 0 && strings.HasPrefix(words[0], "--") {
				k, v, _ := strings.Cut(strings.TrimPrefix(words[0], "--"), "=")
				switch k {
				case "chown":
					chown = v
				case "chmod":
					chmod = v
				default:
					return BuildSpec{}, nil, bad(ins.line, "%s --%s is not supported", kw, k)
				}
				words = words[1:]
			}
			if strings.HasPrefix(strings.TrimSpace(strings.Join(words, " ")), "[") {
				if err := json.Unmarshal([]byte(strings.Join(words, " ")), &words); err != nil {
					return BuildSpec{}, nil, bad(ins.line, "invalid JSON form")
				}
			}
			if len(words) < 2 {
				return BuildSpec{}, nil, bad(ins.line, "expected %s src... dest", kw)
			}
			dest := words[len(words)-1]
			if len(words) > 2 && !strings.HasSuffix(dest, "/") {
				dest += "/"
			}
			for _, src := range words[:len(words)-1] {
				if strings.Contains(src, "://") {
					return BuildSpec{}, nil, bad(ins.line, "ADD from a URL is not supported; download it in a RUN step")
				}
				steps = append(steps, Step{Type: "COPY", Args: []string{src, dest, chown, chmod}, FilesHash: contextHash})
			}
		case "ENV":
			words := shellWords(rest)
			var args []string
			if len(words) >= 2 && !strings.Contains(words[0], "=") {
				args = []string{words[0], strings.TrimSpace(strings.TrimPrefix(rest, words[0]))}
			} else {
				for _, w := range words {
					k, v, ok := strings.Cut(w, "=")
					if !ok {
						return BuildSpec{}, nil, bad(ins.line, "expected ENV key=value")
					}
					args = append(args, k, v)
				}
			}
			steps = append(steps, Step{Type: "ENV", Args: args})
		case "WORKDIR":
			steps = append(steps, Step{Type: "WORKDIR", Args: []string{rest}})
			setWorkdir = true
		case "USER":
			steps = append(steps, Step{Type: "USER", Args: []string{rest}})
			setUser = true
		case "CMD", "ENTRYPOINT":
			spec.StartCmd = shellOrExec(rest)
		default:
			warnings = append(warnings, fmt.Sprintf("Dockerfile line %d: %s is ignored", ins.line, strings.ToUpper(kw)))
		}
	}
	if spec.FromImage == "" {
		return BuildSpec{}, nil, sandbox.Errorf(sandbox.KindInvalid, "the Dockerfile has no FROM")
	}
	if !setUser {
		steps = append(steps, Step{Type: "USER", Args: []string{DefaultBuildUser}})
	}
	if !setWorkdir {
		steps = append(steps, Step{Type: "WORKDIR", Args: []string{DefaultBuildWorkdir}})
	}
	spec.Steps = steps
	return spec, warnings, nil
}

type dockerfileLine struct {
	line int // where the instruction starts, from 1
	text string
}

// dockerfileLines joins continued lines and drops comments and blanks.
func dockerfileLines(text string) []dockerfileLine {
	var out []dockerfileLine
	var cur strings.Builder
	start := 0
	for i, l := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "#") || (t == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if cont, ok := strings.CutSuffix(t, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(t)
		out = append(out, dockerfileLine{line: start, text: strings.TrimSpace(cur.String())})
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, dockerfileLine{line: start, text: strings.TrimSpace(cur.String())})
	}
	return out
}

// shellOrExec returns a RUN or CMD argument as a shell command: the exec
// form's words are quoted and joined.
func shellOrExec(s string) string {
	var words []string
	if strings.HasPrefix(s, "[") && json.Unmarshal([]byte(s), &words) == nil {
		q := make([]string, len(words))
		for i, w := range words {
			q[i] = shellQuote(w)
		}
		return strings.Join(q, " ")
	}
	return s
}

// shellWords splits s on blanks, honouring quotes and backslashes.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, c := range s {
		switch {
		case escaped:
			cur.WriteRune(c)
			escaped = false
		case c == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteRune(c)
			}
		case c == '"' || c == '\'':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
