package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/warrenhq/warren/internal/agent/oom"
	"github.com/warrenhq/warren/internal/agent/users"
	"github.com/warrenhq/warren/proto/process"
)

// systemTag is reserved by envd for its own processes.
const systemTag = "_system"

// Start runs a process and streams its events until it ends. The process
// lives until it exits or the request's deadline passes; the client
// leaving early does not stop it.
func (s *Service) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	sub := newSubscriber()
	p, err := s.spawn(ctx, req, sub)
	if err != nil {
		return err
	}
	return s.follow(ctx, req.Header(), p, sub, nil, func(ev *process.ProcessEvent) error {
		return stream.Send(&process.StartResponse{Event: ev})
	})
}

// spawn validates the request, starts the process with sub attached, and
// starts the goroutines that read its output and reap it.
func (s *Service) spawn(ctx context.Context, req *connect.Request[process.StartRequest], sub *subscriber) (*proc, error) {
	if s.ctx.Err() != nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("the agent is shutting down"))
	}
	msg := req.Msg
	cfg := msg.GetProcess()
	if cfg == nil || cfg.GetCmd() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	}
	if msg.Tag != nil && *msg.Tag == systemTag {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("tag '%s' is reserved", systemTag))
	}
	if err := validateConfig(cfg); err != nil {
		return nil, err
	}
	var size *winsize
	if msg.Pty != nil {
		sz, err := ptySize(msg.Pty.GetSize(), true)
		if err != nil {
			return nil, err
		}
		size = &sz
	}

	u, err := s.user(req.Header())
	if err != nil {
		return nil, err
	}
	cwd, err := s.workdir(u, cfg.Cwd)
	if err != nil {
		return nil, err
	}

	// The process outlives the request but keeps its deadline
	// (Connect-Timeout-Ms); without one it runs until it exits.
	pctx, cancel := context.WithCancel(s.ctx)
	if dl, ok := ctx.Deadline(); ok {
		pctx, cancel = context.WithDeadline(s.ctx, dl)
	}
	cmd := exec.CommandContext(pctx, cfg.GetCmd(), cfg.GetArgs()...)
	cmd.Dir = cwd
	cmd.Env = s.environ(u, cfg.GetEnvs())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: credential(u)}
	// Kill the whole session so a `bash -c` child dies with its shell.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

	p := &proc{
		tag:     msg.Tag,
		config:  proto.CloneOf(cfg),
		started: time.Now(),
		cmd:     cmd,
		cancel:  cancel,
		subs:    map[*subscriber]struct{}{sub: {}},
	}
	pio, err := startIO(cmd, size, msg.Stdin == nil || msg.GetStdin())
	if err != nil {
		cancel()
		return nil, startError(cfg.GetCmd(), err)
	}
	p.pid = uint32(cmd.Process.Pid)
	if err := oom.MarkUserProcess(cmd.Process.Pid); err != nil {
		s.log.Warn("cannot rank a process for the OOM killer", "pid", p.pid, "err", err)
	}
	p.tty = pio.tty
	p.stdin = pio.stdin
	track := func() {
		var readers sync.WaitGroup
		for _, out := range pio.outputs {
			readers.Go(func() { p.pump(out.f, out.chunk, out.wrap) })
		}
		end := p.wait(pio.files(), &readers)
		s.log.Info("process ended", "pid", p.pid, "status", end.GetStatus())
		s.forgetLater(p)
	}
	s.log.Info("process started", "pid", p.pid, "cmd", cfg.GetCmd(), "user", u.Name, "pty", size != nil)
	if !s.register(p, track) {
		// Close ran while the process started; it must not outlive the agent.
		p.unsubscribe(sub)
		_ = cmd.Cancel()
		track()
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("the agent is shutting down"))
	}
	return p, nil
}

// validateConfig rejects what exec would fail on with an obscure error.
func validateConfig(cfg *process.ProcessConfig) error {
	bad := func(format string, a ...any) error {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, a...))
	}
	if hasNUL(cfg.GetCmd()) || hasNUL(cfg.GetCwd()) {
		return bad("process.cmd and process.cwd must not contain NUL bytes")
	}
	for _, a := range cfg.GetArgs() {
		if hasNUL(a) {
			return bad("process.args must not contain NUL bytes")
		}
	}
	for k, v := range cfg.GetEnvs() {
		if !validEnvName(k) || hasNUL(v) {
			return bad("invalid environment variable %q", k)
		}
	}
	return nil
}

// startError maps a failed exec to a client error: a missing or
// non-executable program is the caller's mistake.
func startError(cmd string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("cannot start '%s': %w", cmd, err))
	}
	if errors.Is(err, syscall.EAGAIN) {
		// fork(2) says EAGAIN when the sandbox's pids limit (or the user's
		// RLIMIT_NPROC) is reached: the sandbox is busy, not broken.
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("cannot start '%s': the sandbox has reached its process limit%s: %w",
			cmd, processLimit(pidsMaxV2, pidsMaxV1), err))
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, exec.ErrNotFound) {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cannot start '%s': %w", cmd, err))
	}
	return connect.NewError(connect.CodeInternal, fmt.Errorf("cannot start '%s': %w", cmd, err))
}

// Where the sandbox's pids limit is, under cgroup v2 and v1. gVisor's
// kernel shows neither.
const (
	pidsMaxV2 = "/sys/fs/cgroup/pids.max"
	pidsMaxV1 = "/sys/fs/cgroup/pids/pids.max"
)

// processLimit names the pids limit the first readable file of files
// holds, for a start refused for it: " of N processes and threads
// (warren serve --pids-limit)", or "" when no file tells (reading one
// takes no new process).
func processLimit(files ...string) string {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if n := strings.TrimSpace(string(b)); n != "" && n != "max" {
			return " of " + n + " processes and threads (warren serve --pids-limit)"
		}
		return ""
	}
	return ""
}

// credential is nil when the agent already is the user, so a non-root agent
// (tests, development) can run processes as itself.
func credential(u *users.User) *syscall.Credential {
	if uint32(os.Geteuid()) == u.UID && uint32(os.Getegid()) == u.GID {
		return nil
	}
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
}
