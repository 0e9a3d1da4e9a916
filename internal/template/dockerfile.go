package template

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
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

// translation is a Dockerfile being written from a template's steps, and
// where the template stands after the steps written so far.
type translation struct {
	b      strings.Builder
	stepOf []string
	instrs []instr
	// user and workdir are the template's, env its variables.
	user, workdir string
	env           map[string]string
	// current is the Dockerfile's USER, "" while unknown (the image may
	// set one): the template's user may differ from it.
	current string
	// shell says some step needs a shell in the image (see needsShell).
	shell  bool
	copies map[int]copySource
}

// emit writes one instruction of the step labelled step.
func (t *translation) emit(in instr, step, format string, args ...any) {
	fmt.Fprintf(&t.b, format+"\n", args...)
	t.stepOf = append(t.stepOf, step)
	t.instrs = append(t.instrs, in)
}

// setUser switches the Dockerfile's USER to u, if it is not u already.
func (t *translation) setUser(step, u string) {
	if u != t.current {
		t.emit(instr{}, step, "USER %s", u)
		t.current = u
	}
}

// translate turns checked steps into a Dockerfile with one instruction
// per step (plus USER switches around steps run as someone else), so the
// engine caches each step as a layer. copies holds each COPY step's
// sources by step index. force rebuilds from the first forced step on:
// a LABEL with nonce in front of it changes every later layer's parent.
func translate(base baseState, steps []checkedStep, copies map[int]copySource, nonce string) plan {
	t := &translation{user: base.User, workdir: base.Workdir, env: maps.Clone(base.Env), shell: needsShell(steps), copies: copies}
	if t.env == nil {
		t.env = map[string]string{}
	}
	t.emit(fromInstr(base.Image), stepBase, "FROM %s", base.Image)
	if base.EnsureUser && t.shell {
		t.setUser(stepBase, "root")
		t.emit(instr{}, stepBase, "RUN %s", jsonArgs("/bin/sh", "-c", ensureUserScript(t.user)))
	}
	if t.workdir != "" && t.shell {
		t.emit(instr{}, stepBase, "WORKDIR %s", t.workdir)
	}
	forced := false
	for i, s := range steps {
		label := fmt.Sprint(i + 1)
		if s.Force && !forced {
			forced = true
			t.emit(instr{}, label, "LABEL dev.warren.rebuild=%s", nonce)
		}
		s.act.emit(t, i, label)
	}
	// The sandbox's agent must start as root; the template's user is
	// metadata the agent applies per process.
	t.setUser(stepFinalize, "root")
	return plan{Dockerfile: t.b.String(), StepOf: t.stepOf, Instrs: t.instrs, User: t.user, Workdir: t.workdir, Env: t.env}
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
