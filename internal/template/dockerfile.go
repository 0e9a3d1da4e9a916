package template

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Step labels as the SDK reads them in a build's log and failure reason.
const (
	stepBase     = "base"
	stepFinalize = "finalize"
)

// DefaultBuildUser and DefaultBuildWorkdir are where a template built
// from an image starts, as in E2B: steps run as "user" in its home unless
// the template says otherwise, and the last user and workdir become the
// sandbox's defaults.
const (
	DefaultBuildUser    = "user"
	DefaultBuildWorkdir = "/home/user"
)

// baseState is what a build starts from.
type baseState struct {
	Image   string
	User    string
	Workdir string
	Env     map[string]string
	// EnsureUser adds a first layer creating User when the image lacks
	// it; set for plain images, not for other templates.
	EnsureUser bool
	// AgentArgs are the agent arguments of the base's sandboxes (the code
	// interpreter's), which the built template's sandboxes keep.
	AgentArgs []string
}

// plan is a generated Dockerfile and what the template ends up with.
type plan struct {
	Dockerfile string
	// StepOf labels each Dockerfile instruction, in order, with the
	// template step it belongs to, so that the engine's "Step N/M" lines
	// map back to the SDK's steps.
	StepOf []string
	// Instrs says what each instruction does, to tell why one failed.
	Instrs  []instr
	User    string
	Workdir string
	Env     map[string]string
}

var (
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// A user name, or uid, optionally with ":group" or ":gid".
	userRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$`)
	modeRE = regexp.MustCompile(`^0?[0-7]{3,4}$`)
)

// validateSteps checks the steps' types and arguments, so that a bad
// request is refused before anything is queued.
func validateSteps(steps []Step) error {
	for i, s := range steps {
		n := i + 1
		bad := func(format string, args ...any) error {
			return sandbox.Errorf(sandbox.KindInvalid, "step %d (%s): %s", n, s.Type, fmt.Sprintf(format, args...))
		}
		for _, a := range s.Args {
			if strings.ContainsRune(a, 0) {
				return bad("argument contains a NUL byte")
			}
		}
		switch s.Type {
		case "RUN":
			if len(s.Args) < 1 || len(s.Args) > 2 || strings.TrimSpace(s.Args[0]) == "" {
				return bad("expected args [command] or [command, user]")
			}
			if len(s.Args) == 2 && s.Args[1] != "" && !userRE.MatchString(s.Args[1]) {
				return bad("invalid user '%s'", s.Args[1])
			}
		case "COPY":
			if len(s.Args) < 2 || len(s.Args) > 4 || s.Args[0] == "" || s.Args[1] == "" {
				return bad("expected args [src, dest, user, mode]")
			}
			if _, err := cleanRel(s.Args[0]); err != nil {
				return bad("invalid source '%s': %v", s.Args[0], err)
			}
			if strings.ContainsAny(s.Args[1], "\n\r") {
				return bad("invalid destination")
			}
			if len(s.Args) > 2 && s.Args[2] != "" && !userRE.MatchString(s.Args[2]) {
				return bad("invalid user '%s'", s.Args[2])
			}
			if len(s.Args) > 3 && s.Args[3] != "" && !modeRE.MatchString(s.Args[3]) {
				return bad("invalid mode '%s': expected octal, like 0755", s.Args[3])
			}
			if s.FilesHash == "" {
				return bad("filesHash is missing: upload the files first")
			}
			if err := checkHash(s.FilesHash); err != nil {
				return bad("%s", sandbox.Message(err))
			}
		case "ENV":
			if len(s.Args) == 0 || len(s.Args)%2 != 0 {
				return bad("expected args [key, value, ...]")
			}
			for j := 0; j < len(s.Args); j += 2 {
				if !envKeyRE.MatchString(s.Args[j]) {
					return bad("invalid variable name '%s'", s.Args[j])
				}
				if strings.ContainsAny(s.Args[j+1], "\n\r") {
					return bad("the value of %s contains a line break", s.Args[j])
				}
			}
		case "WORKDIR":
			if len(s.Args) != 1 || s.Args[0] == "" || strings.ContainsAny(s.Args[0], "\n\r") {
				return bad("expected args [path]")
			}
			// The Dockerfile's escape character: at the end of the line it
			// would join the next instruction to this one.
			if strings.HasSuffix(s.Args[0], `\`) {
				return bad("the path ends in a backslash")
			}
		case "USER":
			if len(s.Args) != 1 || !userRE.MatchString(s.Args[0]) {
				return bad("expected args [user]")
			}
		default:
			return sandbox.Errorf(sandbox.KindInvalid,
				"step %d: unknown step type '%s' (supported: RUN, COPY, ENV, WORKDIR, USER)", n, s.Type)
		}
	}
	return nil
}

// translate turns validated steps into a Dockerfile with one instruction
// per step (plus USER switches around steps run as someone else), so the
// engine caches each step as a layer. copies holds each COPY step's
// sources by step index. force rebuilds from the first forced step on:
// a LABEL with nonce in front of it changes every later layer's parent.
func translate(base baseState, steps []Step, copies map[int]copySource, nonce string) plan {
	var b strings.Builder
	var stepOf []string
	var instrs []instr
	emitAs := func(in instr, step, format string, args ...any) {
		fmt.Fprintf(&b, format+"\n", args...)
		stepOf = append(stepOf, step)
		instrs = append(instrs, in)
	}
	emit := func(step, format string, args ...any) { emitAs(instr{}, step, format, args...) }
	user, workdir := base.User, base.Workdir
	env := maps.Clone(base.Env)
	if env == nil {
		env = map[string]string{}
	}
	emitAs(instr{kind: "FROM", arg: base.Image}, stepBase, "FROM %s", base.Image)
	// The Dockerfile's USER, unknown at first: the image may set one. The
	// template's user may differ from it.
	current := ""
	setUser := func(step, u string) {
		if u != current {
			emit(step, "USER %s", u)
			current = u
		}
	}
	if base.EnsureUser && needsShell(steps) {
		setUser(stepBase, "root")
		emit(stepBase, "RUN %s", jsonArgs("/bin/sh", "-c", ensureUserScript(user)))
	}
	if workdir != "" && needsShell(steps) {
		emit(stepBase, "WORKDIR %s", workdir)
	}
	forced := false
	for i, s := range steps {
		label := fmt.Sprint(i + 1)
		if s.Force && !forced {
			forced = true
			emit(label, "LABEL dev.warren.rebuild=%s", nonce)
		}
		switch s.Type {
		case "RUN":
			u := user
			if len(s.Args) == 2 && s.Args[1] != "" {
				u = s.Args[1]
			}
			setUser(label, u)
			emitAs(instr{kind: "RUN", arg: s.Args[0], user: u}, label, "RUN %s", jsonArgs("/bin/sh", "-c", s.Args[0]))
		case "COPY":
			cs := copies[i]
			owner := copyOwner(s, user)
			emitAs(instr{kind: "COPY", arg: owner}, label, "COPY --chown=%s %s", owner, jsonArgs(cs.From, cs.To))
		case "ENV":
			var kv []string
			for j := 0; j < len(s.Args); j += 2 {
				kv = append(kv, s.Args[j]+"="+quoteEnv(s.Args[j+1]))
				env[s.Args[j]] = s.Args[j+1]
			}
			emit(label, "ENV %s", strings.Join(kv, " "))
		case "WORKDIR":
			workdir = path.Join(workdir, s.Args[0])
			if path.IsAbs(s.Args[0]) {
				workdir = path.Clean(s.Args[0])
			}
			emitAs(instr{kind: "WORKDIR", arg: workdir}, label, "WORKDIR %s", workdir)
		case "USER":
			user = s.Args[0]
			// As E2B's builder: the user is made when the image lacks it.
			// Only in images with a shell, which RUN and COPY steps need.
			if needsShell(steps) {
				setUser(label, "root")
				emitAs(instr{kind: "USER", arg: user}, label, "RUN %s", jsonArgs("/bin/sh", "-c", createUserScript(user)))
			}
		}
	}
	// The sandbox's agent must start as root; the template's user is
	// metadata the agent applies per process.
	setUser(stepFinalize, "root")
	return plan{Dockerfile: b.String(), StepOf: stepOf, Instrs: instrs, User: user, Workdir: workdir, Env: env}
}

// needsShell reports whether any step runs a command or copies files as a
// user, which the base layer must then provide.
func needsShell(steps []Step) bool {
	for _, s := range steps {
		if s.Type == "RUN" || s.Type == "COPY" {
			return true
		}
	}
	return false
}

// createUserScript creates user (with its home) when the image lacks it,
// as E2B's builder does for a USER step, and fails when it cannot.
func createUserScript(user string) string {
	name, _, _ := strings.Cut(user, ":")
	q := shellQuote(name)
	return fmt.Sprintf("id -u %[1]s >/dev/null 2>&1 || useradd --create-home --shell /bin/bash %[1]s || adduser -D %[1]s", q)
}

// ensureUserScript creates user (with its home) when the image lacks it,
// with whichever tool the image has.
func ensureUserScript(user string) string {
	name, _, _ := strings.Cut(user, ":")
	q := shellQuote(name)
	return fmt.Sprintf("id -u %[1]s >/dev/null 2>&1 || useradd -m -s /bin/bash %[1]s 2>/dev/null || useradd -m %[1]s 2>/dev/null || adduser -D %[1]s 2>/dev/null || true", q)
}

// jsonArgs is a Dockerfile's JSON form of args, readable in the log:
// no HTML escaping of <, > and &.
func jsonArgs(args ...string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(args)
	return strings.TrimSuffix(b.String(), "\n")
}

// quoteEnv quotes a value for a Dockerfile ENV: variables in it still
// expand, as in a Dockerfile.
func quoteEnv(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
