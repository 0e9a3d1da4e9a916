package template

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
)

// StepType is a build step's type, as the SDK names it.
type StepType string

const (
	StepRun     StepType = "RUN"     // args [command] or [command, user]
	StepCopy    StepType = "COPY"    // args [src, dest, user, mode], files in FilesHash
	StepEnv     StepType = "ENV"     // args [key, value, ...]
	StepWorkdir StepType = "WORKDIR" // args [path]
	StepUser    StepType = "USER"    // args [user]
)

// stepKind is everything the registry knows of one step type, so that a
// new type is one entry: how a Dockerfile instruction becomes steps of
// it, how its positional args are checked and read, and (through the
// action decode returns) how it becomes Dockerfile instructions.
type stepKind struct {
	// decode checks a step's args and returns what they say; its error
	// says what is wrong with them, the caller says which step.
	decode func(s Step) (action, error)
	// fromDockerfile turns a Dockerfile instruction's keyword (as
	// written) and argument into steps; contextHash is the upload every
	// COPY takes its files from.
	fromDockerfile func(keyword, arg, contextHash string) ([]Step, error)
	// shell says the step runs a command or copies files as a user, which
	// needs a shell (and the user) in the image.
	shell bool
}

// stepTypes are the supported types, in the order errors list them.
var stepTypes = []StepType{StepRun, StepCopy, StepEnv, StepWorkdir, StepUser}

var stepKinds = map[StepType]stepKind{
	StepRun:     {decode: decodeRun, fromDockerfile: runFromDockerfile, shell: true},
	StepCopy:    {decode: decodeCopy, fromDockerfile: copyFromDockerfile, shell: true},
	StepEnv:     {decode: decodeEnv, fromDockerfile: envFromDockerfile},
	StepWorkdir: {decode: decodeWorkdir, fromDockerfile: oneArg(StepWorkdir)},
	StepUser:    {decode: decodeUser, fromDockerfile: oneArg(StepUser)},
}

// dockerfileSteps are the Dockerfile instructions that are build steps,
// by keyword: a local ADD is a COPY.
var dockerfileSteps = map[string]StepType{
	"RUN": StepRun, "COPY": StepCopy, "ADD": StepCopy, "ENV": StepEnv, "WORKDIR": StepWorkdir, "USER": StepUser,
}

// action is a checked step as its kind reads it.
type action interface {
	// emit writes the step's instructions, labelled label, for the step
	// at index i.
	emit(t *translation, i int, label string)
}

// checkedStep is a step with its args read.
type checkedStep struct {
	Step
	act action
}

var (
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// A user name, or uid, optionally with ":group" or ":gid".
	userRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$`)
	modeRE = regexp.MustCompile(`^0?[0-7]{3,4}$`)
)

// checkSteps checks the steps' types and arguments, so that a bad request
// is refused before anything is queued, and returns them read.
func checkSteps(steps []Step) ([]checkedStep, error) {
	out := make([]checkedStep, 0, len(steps))
	for i, s := range steps {
		bad := func(why string) error {
			return sandbox.Errorf(sandbox.KindInvalid, "step %d (%s): %s", i+1, s.Type, why)
		}
		for _, a := range s.Args {
			if strings.ContainsRune(a, 0) {
				return nil, bad("argument contains a NUL byte")
			}
		}
		k, ok := stepKinds[s.Type]
		if !ok {
			names := make([]string, len(stepTypes))
			for j, t := range stepTypes {
				names[j] = string(t)
			}
			return nil, sandbox.Errorf(sandbox.KindInvalid,
				"step %d: unknown step type '%s' (supported: %s)", i+1, s.Type, strings.Join(names, ", "))
		}
		act, err := k.decode(s)
		if err != nil {
			return nil, bad(err.Error())
		}
		out = append(out, checkedStep{Step: s, act: act})
	}
	return out, nil
}

// needsShell reports whether any step runs a command or copies files as a
// user, which the base layer must then provide.
func needsShell(steps []checkedStep) bool {
	for _, s := range steps {
		if stepKinds[s.Type].shell {
			return true
		}
	}
	return false
}

// RUN

type runStep struct {
	cmd  string
	user string // "" = the template's user
}

func decodeRun(s Step) (action, error) {
	if len(s.Args) < 1 || len(s.Args) > 2 || strings.TrimSpace(s.Args[0]) == "" {
		return nil, errors.New("expected args [command] or [command, user]")
	}
	r := runStep{cmd: s.Args[0]}
	if len(s.Args) == 2 {
		r.user = s.Args[1]
	}
	if r.user != "" && !userRE.MatchString(r.user) {
		return nil, fmt.Errorf("invalid user '%s'", r.user)
	}
	return r, nil
}

func runFromDockerfile(_, arg, _ string) ([]Step, error) {
	return []Step{{Type: StepRun, Args: []string{shellOrExec(arg)}}}, nil
}

func (r runStep) emit(t *translation, _ int, label string) {
	u := t.user
	if r.user != "" {
		u = r.user
	}
	t.setUser(label, u)
	t.emit(runInstr(r.cmd, u), label, "RUN %s", jsonArgs("/bin/sh", "-c", r.cmd))
}

// COPY

type copyStep struct {
	src, dest string
	user      string // "" = the template's user
	mode      int64  // when hasMode
	hasMode   bool
	filesHash string
}

func decodeCopy(s Step) (action, error) {
	if len(s.Args) < 2 || len(s.Args) > 4 || s.Args[0] == "" || s.Args[1] == "" {
		return nil, errors.New("expected args [src, dest, user, mode]")
	}
	c := copyStep{src: s.Args[0], dest: s.Args[1], filesHash: s.FilesHash}
	if _, err := cleanRel(c.src); err != nil {
		return nil, fmt.Errorf("invalid source '%s': %v", c.src, err)
	}
	if strings.ContainsAny(c.dest, "\n\r") {
		return nil, errors.New("invalid destination")
	}
	if len(s.Args) > 2 {
		c.user = s.Args[2]
	}
	if c.user != "" && !userRE.MatchString(c.user) {
		return nil, fmt.Errorf("invalid user '%s'", c.user)
	}
	if len(s.Args) > 3 && s.Args[3] != "" {
		if !modeRE.MatchString(s.Args[3]) {
			return nil, fmt.Errorf("invalid mode '%s': expected octal, like 0755", s.Args[3])
		}
		c.mode, _ = strconv.ParseInt(s.Args[3], 8, 32) // modeRE: at most 4 octal digits
		c.hasMode = true
	}
	if c.filesHash == "" {
		return nil, errors.New("filesHash is missing: upload the files first")
	}
	if err := checkHash(c.filesHash); err != nil {
		return nil, errors.New(sandbox.Message(err))
	}
	return c, nil
}

// copyFromDockerfile reads COPY and ADD [--chown=u] [--chmod=m] src...
// dest (or its JSON form): one step per source.
func copyFromDockerfile(keyword, arg, contextHash string) ([]Step, error) {
	words := shellWords(arg)
	var chown, chmod string
	for len(words) > 0 && strings.HasPrefix(words[0], "--") {
		k, v, _ := strings.Cut(strings.TrimPrefix(words[0], "--"), "=")
		switch k {
		case "chown":
			chown = v
		case "chmod":
			chmod = v
		default:
			return nil, fmt.Errorf("%s --%s is not supported", keyword, k)
		}
		words = words[1:]
	}
	if strings.HasPrefix(strings.TrimSpace(strings.Join(words, " ")), "[") {
		if err := json.Unmarshal([]byte(strings.Join(words, " ")), &words); err != nil {
			return nil, errors.New("invalid JSON form")
		}
	}
	if len(words) < 2 {
		return nil, fmt.Errorf("expected %s src... dest", keyword)
	}
	dest := words[len(words)-1]
	if len(words) > 2 && !strings.HasSuffix(dest, "/") {
		dest += "/"
	}
	var steps []Step
	for _, src := range words[:len(words)-1] {
		if strings.Contains(src, "://") {
			return nil, errors.New("ADD from a URL is not supported; download it in a RUN step")
		}
		steps = append(steps, Step{Type: StepCopy, Args: []string{src, dest, chown, chmod}, FilesHash: contextHash})
	}
	return steps, nil
}

func (c copyStep) emit(t *translation, i int, label string) {
	cs := t.copies[i]
	owner := c.owner(t.user)
	t.emit(copyInstr(owner), label, "COPY --chown=%s %s", owner, jsonArgs(cs.From, cs.To))
}

// owner is the --chown of a COPY step: its user, else the template's user
// at that point, with the group of the same name unless it says one.
func (c copyStep) owner(user string) string {
	owner := user
	if c.user != "" {
		owner = c.user
	}
	if !strings.Contains(owner, ":") {
		owner += ":" + owner
	}
	return owner
}

// ENV

type envStep struct {
	vars [][2]string // key, value; in order
}

func decodeEnv(s Step) (action, error) {
	if len(s.Args) == 0 || len(s.Args)%2 != 0 {
		return nil, errors.New("expected args [key, value, ...]")
	}
	var e envStep
	for j := 0; j < len(s.Args); j += 2 {
		k, v := s.Args[j], s.Args[j+1]
		if !envKeyRE.MatchString(k) {
			return nil, fmt.Errorf("invalid variable name '%s'", k)
		}
		if strings.ContainsAny(v, "\n\r") {
			return nil, fmt.Errorf("the value of %s contains a line break", k)
		}
		e.vars = append(e.vars, [2]string{k, v})
	}
	return e, nil
}

// envFromDockerfile reads ENV key=value... and the older ENV key value.
func envFromDockerfile(_, arg, _ string) ([]Step, error) {
	words := shellWords(arg)
	var args []string
	if len(words) >= 2 && !strings.Contains(words[0], "=") {
		args = []string{words[0], strings.TrimSpace(strings.TrimPrefix(arg, words[0]))}
	} else {
		for _, w := range words {
			k, v, ok := strings.Cut(w, "=")
			if !ok {
				return nil, errors.New("expected ENV key=value")
			}
			args = append(args, k, v)
		}
	}
	return []Step{{Type: StepEnv, Args: args}}, nil
}

func (e envStep) emit(t *translation, _ int, label string) {
	kv := make([]string, len(e.vars))
	for j, v := range e.vars {
		kv[j] = v[0] + "=" + quoteEnv(v[1])
		t.env[v[0]] = v[1]
	}
	t.emit(instr{}, label, "ENV %s", strings.Join(kv, " "))
}

// WORKDIR

type workdirStep struct{ path string }

func decodeWorkdir(s Step) (action, error) {
	if len(s.Args) != 1 || s.Args[0] == "" || strings.ContainsAny(s.Args[0], "\n\r") {
		return nil, errors.New("expected args [path]")
	}
	// The Dockerfile's escape character: at the end of the line it would
	// join the next instruction to this one.
	if strings.HasSuffix(s.Args[0], `\`) {
		return nil, errors.New("the path ends in a backslash")
	}
	return workdirStep{path: s.Args[0]}, nil
}

func (w workdirStep) emit(t *translation, _ int, label string) {
	t.workdir = path.Join(t.workdir, w.path)
	if path.IsAbs(w.path) {
		t.workdir = path.Clean(w.path)
	}
	t.emit(workdirInstr(), label, "WORKDIR %s", t.workdir)
}

// USER

type userStep struct{ user string }

func decodeUser(s Step) (action, error) {
	if len(s.Args) != 1 || !userRE.MatchString(s.Args[0]) {
		return nil, errors.New("expected args [user]")
	}
	return userStep{user: s.Args[0]}, nil
}

func (u userStep) emit(t *translation, _ int, label string) {
	t.user = u.user
	// As E2B's builder: the user is made when the image lacks it. Only in
	// images with a shell, which RUN and COPY steps need.
	if t.shell {
		t.setUser(label, "root")
		t.emit(userInstr(), label, "RUN %s", jsonArgs("/bin/sh", "-c", createUserScript(u.user)))
	}
}

// oneArg reads a Dockerfile instruction whose argument is the step's one
// arg, as WORKDIR's and USER's are.
func oneArg(typ StepType) func(_, arg, _ string) ([]Step, error) {
	return func(_, arg, _ string) ([]Step, error) {
		return []Step{{Type: typ, Args: []string{arg}}}, nil
	}
}
