package template

import (
	"strings"
	"testing"
)

// FuzzTranslate feeds steps the API would accept to translate: each must
// stay one Dockerfile instruction per line, so that no argument can add
// instructions of its own (a line break, or a trailing backslash that
// joins the next line).
func FuzzTranslate(f *testing.F) {
	f.Add(uint8(0), "echo hi", "user", "")
	f.Add(uint8(1), "app", "/opt/app", "0755")
	f.Add(uint8(2), "KEY", `va"l\`, "")
	f.Add(uint8(3), `/srv\`, "", "")
	f.Add(uint8(4), "root", "", "")
	f.Fuzz(func(t *testing.T, kind uint8, a, b, c string) {
		var s Step
		switch kind % 5 {
		case 0:
			s = Step{Type: "RUN", Args: []string{a, b}}
		case 1:
			s = Step{Type: "COPY", Args: []string{a, b, "user", c}, FilesHash: strings.Repeat("ab", 32)}
		case 2:
			s = Step{Type: "ENV", Args: []string{a, b}}
		case 3:
			s = Step{Type: "WORKDIR", Args: []string{a}}
		case 4:
			s = Step{Type: "USER", Args: []string{a}}
		}
		steps := []Step{s, {Type: "RUN", Args: []string{"true"}}}
		if validateSteps(steps) != nil {
			return
		}
		base := baseState{Image: "warren/base", User: DefaultBuildUser, Workdir: DefaultBuildWorkdir, EnsureUser: true}
		copies := map[int]copySource{0: {From: "s1/app", To: b}}
		p := translate(base, steps, copies, "nonce")
		lines := strings.Split(strings.TrimSuffix(p.Dockerfile, "\n"), "\n")
		if len(lines) != len(p.StepOf) {
			t.Fatalf("%d lines for %d instructions:\n%s", len(lines), len(p.StepOf), p.Dockerfile)
		}
		for _, l := range lines {
			if strings.HasSuffix(l, `\`) {
				t.Fatalf("line %q continues onto the next:\n%s", l, p.Dockerfile)
			}
		}
		lastUser := ""
		for _, l := range lines {
			if strings.HasPrefix(l, "USER ") {
				lastUser = l
			}
		}
		if lastUser != "USER root" {
			t.Fatalf("the image ends with %q, want USER root (the agent starts as root):\n%s", lastUser, p.Dockerfile)
		}
	})
}

// FuzzParseDockerfile feeds arbitrary Dockerfiles to the parser behind
// `warren template build` and POST /templates: it must not panic, and
// what it accepts must be steps the build then checks like the SDK's.
func FuzzParseDockerfile(f *testing.F) {
	f.Add("FROM warren/base\nRUN echo hi \\\n && echo there\nCOPY --chown=user --chmod=755 a /b\nENV A=1 B=\"two words\"\nWORKDIR /srv\nUSER root\nCMD [\"sleep\", \"infinity\"]\n")
	f.Add("FROM x AS y\nRUN [\"/bin/sh\", \"-c\", \"true\"]\nENV K v w\n")
	f.Add("# comment\n\nFROM\n")
	f.Fuzz(func(t *testing.T, text string) {
		spec, _, err := ParseDockerfile(text, strings.Repeat("ab", 32))
		if err != nil {
			return
		}
		if spec.FromImage == "" && spec.FromTemplate == "" {
			t.Fatalf("accepted without a base: %+v", spec)
		}
		validateSteps(spec.Steps)
	})
}
