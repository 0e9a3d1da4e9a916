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
	steps := []Step{{Type: StepUser, Args: []string{"root"}}, {Type: StepWorkdir, Args: []string{"/"}}}
	set := map[StepType]bool{} // the types the Dockerfile has steps of
	for _, ins := range dockerfileLines(text) {
		kw, rest, _ := strings.Cut(ins.text, " ")
		rest = strings.TrimSpace(rest)
		switch upper := strings.ToUpper(kw); upper {
		case "FROM":
			if spec.FromImage != "" {
				return BuildSpec{}, nil, bad(ins.line, "multi-stage Dockerfiles are not supported")
			}
			f := strings.Fields(rest)
			if len(f) == 0 || strings.HasPrefix(f[0], "--") {
				return BuildSpec{}, nil, bad(ins.line, "expected FROM image")
			}
			spec.FromImage = f[0]
		case "CMD", "ENTRYPOINT":
			spec.StartCmd = shellOrExec(rest)
		default:
			typ, ok := dockerfileSteps[upper]
			if !ok {
				warnings = append(warnings, fmt.Sprintf("Dockerfile line %d: %s is ignored", ins.line, upper))
				continue
			}
			more, err := stepKinds[typ].fromDockerfile(kw, rest, contextHash)
			if err != nil {
				return BuildSpec{}, nil, bad(ins.line, "%s", err)
			}
			steps = append(steps, more...)
			set[typ] = true
		}
	}
	if spec.FromImage == "" {
		return BuildSpec{}, nil, sandbox.Errorf(sandbox.KindInvalid, "the Dockerfile has no FROM")
	}
	if !set[StepUser] {
		steps = append(steps, Step{Type: StepUser, Args: []string{DefaultBuildUser}})
	}
	if !set[StepWorkdir] {
		steps = append(steps, Step{Type: StepWorkdir, Args: []string{DefaultBuildWorkdir}})
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
