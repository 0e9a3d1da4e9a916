package e2b

import (
	"context"
	"io"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/sdk/go/internal/envd/process"
)

// Commands starts processes in a sandbox and reaches the ones running there.
type Commands struct{ e *envdConn }

// CommandOptions configures a command.
type CommandOptions struct {
	// Envs are added to the sandbox's environment variables for this command only.
	Envs map[string]string
	// Cwd is the working directory; default the user's home (or the template's workdir).
	Cwd string
	// User runs the command as this user; default the sandbox's default user.
	User string
	// Stdout and Stderr receive the command's output as it arrives, from one goroutine at a
	// time; the output is also kept for the result. nil: only kept.
	Stdout, Stderr io.Writer
	// Stdin keeps the command's standard input open for SendStdin; default closed.
	Stdin bool
	// Timeout bounds the command: when it elapses the command is killed and waiting for it
	// returns a *TimeoutError. 0 means DefaultCommandTimeout, NoTimeout (or any negative value) no limit.
	Timeout time.Duration
	// Tag names the process in List.
	Tag string
}

// ConnectCommandOptions configures Connect to a running command.
type ConnectCommandOptions struct {
	// Stdout and Stderr receive the output from now on, as in CommandOptions.
	Stdout, Stderr io.Writer
	// Timeout bounds how long the handle listens (not the command): 0 means
	// DefaultCommandTimeout, negative no limit.
	Timeout time.Duration
}

// CommandResult is what a finished command left.
type CommandResult struct {
	ExitCode int
	// Error is the agent's account of an abnormal end ("signal: killed"), "" otherwise.
	Error  string
	Stdout string
	Stderr string
}

// ProcessInfo describes a process running in the sandbox.
type ProcessInfo struct {
	PID  uint32
	Tag  string
	Cmd  string
	Args []string
	Envs map[string]string
	Cwd  string
}

// Run runs cmd with bash (`/bin/bash -l -c cmd`) and waits for it. A non-zero exit code is a
// *CommandExitError, which carries the result too.
func (c *Commands) Run(ctx context.Context, cmd string, opts CommandOptions) (*CommandResult, error) {
	h, err := c.Start(ctx, cmd, opts)
	if err != nil {
		return nil, err
	}
	return h.Wait(ctx)
}

// Start starts cmd as Run does and returns at once with a handle on it. ctx bounds the
// start and the handle's stream; the command's own limit is opts.Timeout.
func (c *Commands) Start(ctx context.Context, cmd string, opts CommandOptions) (*CommandHandle, error) {
	req := connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}, Envs: opts.Envs, Cwd: optional(opts.Cwd)},
		Tag:     optional(opts.Tag),
		Stdin:   &opts.Stdin,
	})
	return c.e.start(ctx, req, opts.User, opts.Timeout, outputs{stdout: opts.Stdout, stderr: opts.Stderr})
}

// Connect attaches to a running command by its PID.
func (c *Commands) Connect(ctx context.Context, pid uint32, opts ConnectCommandOptions) (*CommandHandle, error) {
	return c.e.connect(ctx, pid, opts.Timeout, outputs{stdout: opts.Stdout, stderr: opts.Stderr})
}

// List returns the processes running in the sandbox.
func (c *Commands) List(ctx context.Context) ([]ProcessInfo, error) {
	ctx, cancel := withTimeout(ctx, c.e.cfg.RequestTimeout)
	defer cancel()
	res, err := c.e.process.List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		return nil, c.e.rpcError(err, nil)
	}
	out := make([]ProcessInfo, 0, len(res.Msg.GetProcesses()))
	for _, p := range res.Msg.GetProcesses() {
		cfg := p.GetConfig()
		out = append(out, ProcessInfo{PID: p.GetPid(), Tag: p.GetTag(), Cmd: cfg.GetCmd(), Args: cfg.GetArgs(), Envs: cfg.GetEnvs(), Cwd: cfg.GetCwd()})
	}
	return out, nil
}

// Kill kills a process (SIGKILL); false when there was no such process.
func (c *Commands) Kill(ctx context.Context, pid uint32) (bool, error) { return c.e.kill(ctx, pid) }

// SendStdin writes data to the standard input of a process started with Stdin true.
func (c *Commands) SendStdin(ctx context.Context, pid uint32, data []byte) error {
	return c.e.sendInput(ctx, pid, &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: data}})
}

// CloseStdin closes the standard input of a process started with Stdin true (so `cat`
// ends, say).
func (c *Commands) CloseStdin(ctx context.Context, pid uint32) error {
	if versionBefore(c.e.version, envdCloseStdin) {
		return invalidArg("closing stdin needs envd %s or newer (the sandbox has %s): rebuild the template", envdCloseStdin, c.e.version)
	}
	ctx, cancel := withTimeout(ctx, c.e.cfg.RequestTimeout)
	defer cancel()
	_, err := c.e.process.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: selectPID(pid)}))
	return c.e.rpcError(err, nil)
}

func (e *envdConn) kill(ctx context.Context, pid uint32) (bool, error) {
	ctx, cancel := withTimeout(ctx, e.cfg.RequestTimeout)
	defer cancel()
	_, err := e.process.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: selectPID(pid), Signal: process.Signal_SIGNAL_SIGKILL}))
	if connect.CodeOf(err) == connect.CodeNotFound {
		return false, nil
	}
	if err != nil {
		return false, e.rpcError(err, nil)
	}
	return true, nil
}

func (e *envdConn) sendInput(ctx context.Context, pid uint32, in *process.ProcessInput) error {
	ctx, cancel := withTimeout(ctx, e.cfg.RequestTimeout)
	defer cancel()
	_, err := e.process.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: selectPID(pid), Input: in}))
	return e.rpcError(err, nil)
}

func selectPID(pid uint32) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
