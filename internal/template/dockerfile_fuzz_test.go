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
		checked, err := checkSteps([]Step{s, {Type: "RUN", Args: []string{"true"}}})
		if err != nil {
			return
		}
		checkPlan(t, translate(fuzzBase, checked, map[int]copySource{0: {From: "s1/app", To: b}}, "nonce"))
	})
}

var fuzzBase = baseState{Image: "warren/base", User: DefaultBuildUser, Workdir: DefaultBuildWorkdir, EnsureUser: true}

// checkPlan fails t unless p is one Dockerfile instruction per line,
// none continued onto the next, and the image ends as root.
func checkPlan(t *testing.T, p plan) {
	t.Helper()
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
}

// FuzzCheckSteps feeds checkSteps any type with any number of args, as a
// POST /v2/templates/{id}/builds/{build} body may: it must not panic, and
// what it accepts must translate as FuzzTranslate's steps do, every COPY
// with its source prepared.
func FuzzCheckSteps(f *testing.F) {
	hash := strings.Repeat("ab", 32)
	f.Add("RUN", "echo hi\x00user", hash)
	f.Add("COPY", "app\x00/opt/app\x00\x000755", hash)
	f.Add("COPY", "app", "")
	f.Add("ENV", "A\x001\x00B", "")
	f.Add("WORKDIR", "", "")
	f.Add("USER", "root\x00root", "")
	f.Add("FROB", "x", "")
	f.Fuzz(func(t *testing.T, typ, args, filesHash string) {
		// The NUL byte, which checkSteps refuses in an arg, splits them.
		s := Step{Type: StepType(typ), Args: strings.Split(args, "\x00"), FilesHash: filesHash}
		if args == "" {
			s.Args = nil
		}
		checked, err := checkSteps([]Step{s})
		if err != nil {
			if !strings.Contains(err.Error(), "step 1") {
				t.Fatalf("error %q does not name the step", err)
			}
			return
		}
		if _, ok := stepKinds[s.Type]; !ok {
			t.Fatalf("accepted step type %q", typ)
		}
		copies := map[int]copySource{}
		if c, ok := checked[0].act.(copyStep); ok {
			copies[0] = copySource{From: "s1/" + c.src, To: c.dest}
		}
		checkPlan(t, translate(fuzzBase, checked, copies, "nonce"))
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
		checkSteps(spec.Steps)
	})
}
