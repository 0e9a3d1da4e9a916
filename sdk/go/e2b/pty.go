package e2b

import (
	"context"
	"io"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/sdk/go/internal/envd/process"
)

// Pty starts interactive terminals in a sandbox.
type Pty struct{ e *envdConn }

// PtySize is a terminal's size in characters.
type PtySize struct {
	Cols, Rows uint32
}

// PtyOptions configures a terminal.
type PtyOptions struct {
	Size PtySize
	// Output receives what the terminal prints, from one goroutine at a time.
	Output io.Writer
	// Envs are added to the defaults (TERM=xterm-256color, LANG and LC_ALL C.UTF-8).
	Envs map[string]string
	Cwd  string
	User string
	// Timeout bounds the terminal's life: 0 means DefaultCommandTimeout, negative no limit.
	Timeout time.Duration
}

// Create starts an interactive login bash on a new terminal.
func (p *Pty) Create(ctx context.Context, opts PtyOptions) (*CommandHandle, error) {
	envs := map[string]string{"TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
	for k, v := range opts.Envs {
		envs[k] = v
	}
	req := connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-i", "-l"}, Envs: envs, Cwd: optional(opts.Cwd)},
		Pty:     &process.PTY{Size: &process.PTY_Size{Cols: opts.Size.Cols, Rows: opts.Size.Rows}},
	})
	return p.e.start(ctx, req, opts.User, opts.Timeout, outputs{pty: opts.Output})
}

// Connect attaches to a running terminal; output goes to out from now on.
func (p *Pty) Connect(ctx context.Context, pid uint32, out io.Writer, timeout time.Duration) (*CommandHandle, error) {
	return p.e.connect(ctx, pid, timeout, outputs{pty: out})
}

// SendInput types data into a terminal.
func (p *Pty) SendInput(ctx context.Context, pid uint32, data []byte) error {
	return p.e.sendInput(ctx, pid, &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: data}})
}

// Resize changes a terminal's size.
func (p *Pty) Resize(ctx context.Context, pid uint32, size PtySize) error {
	ctx, cancel := withTimeout(ctx, p.e.cfg.RequestTimeout)
	defer cancel()
	_, err := p.e.process.Update(ctx, connect.NewRequest(&process.UpdateRequest{
		Process: selectPID(pid),
		Pty:     &process.PTY{Size: &process.PTY_Size{Cols: size.Cols, Rows: size.Rows}},
	}))
	return p.e.rpcError(err, nil)
}

// Kill kills a terminal's process; false when there was none.
func (p *Pty) Kill(ctx context.Context, pid uint32) (bool, error) { return p.e.kill(ctx, pid) }
