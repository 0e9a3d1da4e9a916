package e2b

import (
	"bytes"
	"context"
	"io"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/sdk/go/internal/envd/process"
)

// CommandHandle is a command (or a PTY) running in a sandbox: its output as it arrives, its
// end, and the calls that act on it. It is safe for concurrent use.
type CommandHandle struct {
	// PID is the process's ID in the sandbox.
	PID uint32

	e      *envdConn
	cancel context.CancelFunc
	done   chan struct{}

	mu           sync.Mutex // guards the fields below
	stdout       bytes.Buffer
	stderr       bytes.Buffer
	result       *CommandResult
	err          error
	disconnected bool
}

// outputs are where a handle's stream goes as it arrives.
type outputs struct {
	stdout, stderr, pty io.Writer
}

// eventStream is the server stream of Start or Connect.
type eventStream interface {
	Receive() bool
	Err() error
	Close() error
	event() *process.ProcessEvent
}

type startStream struct {
	*connect.ServerStreamForClient[process.StartResponse]
}

func (s startStream) event() *process.ProcessEvent { return s.Msg().GetEvent() }

type connectStream struct {
	*connect.ServerStreamForClient[process.ConnectResponse]
}

func (s connectStream) event() *process.ProcessEvent { return s.Msg().GetEvent() }

// streamContext bounds a stream by timeout (0: DefaultCommandTimeout, negative: none); the
// agent learns the bound from the Connect-Timeout-Ms header.
func streamContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout == 0 {
		timeout = DefaultCommandTimeout
	}
	return withTimeout(ctx, timeout)
}

func (e *envdConn) start(ctx context.Context, req *connect.Request[process.StartRequest], user string, timeout time.Duration, out outputs) (*CommandHandle, error) {
	sctx, cancel := streamContext(ctx, timeout)
	e.setUser(req.Header(), user)
	req.Header().Set("Keepalive-Ping-Interval", keepalivePingSeconds)
	s, err := e.process.Start(sctx, req)
	if err != nil {
		cancel()
		return nil, e.rpcError(err, nil)
	}
	return e.handle(startStream{s}, cancel, out)
}

func (e *envdConn) connect(ctx context.Context, pid uint32, timeout time.Duration, out outputs) (*CommandHandle, error) {
	sctx, cancel := streamContext(ctx, timeout)
	req := connect.NewRequest(&process.ConnectRequest{Process: selectPID(pid)})
	req.Header().Set("Keepalive-Ping-Interval", keepalivePingSeconds)
	s, err := e.process.Connect(sctx, req)
	if err != nil {
		cancel()
		return nil, e.rpcError(err, nil)
	}
	return e.handle(connectStream{s}, cancel, out)
}

// handle waits (at most the request timeout) for the stream's first event, which names the
// process, then follows the rest of the stream in a goroutine of its own.
func (e *envdConn) handle(s eventStream, cancel context.CancelFunc, out outputs) (*CommandHandle, error) {
	var timer *time.Timer
	if d := e.cfg.RequestTimeout; d > 0 {
		timer = time.AfterFunc(d, cancel)
	}
	ok := s.Receive()
	if timer != nil && !timer.Stop() {
		s.Close()
		return nil, &TimeoutError{sandboxErr(0, "the command did not start within the request timeout", context.DeadlineExceeded)}
	}
	if !ok {
		err := s.Err()
		s.Close()
		cancel()
		if err == nil {
			return nil, &SandboxError{Message: "the process stream ended before the process started"}
		}
		return nil, e.rpcError(err, nil)
	}
	start := s.event().GetStart()
	if start == nil {
		s.Close()
		cancel()
		return nil, &SandboxError{Message: "Expected start event"}
	}
	h := &CommandHandle{PID: start.GetPid(), e: e, cancel: cancel, done: make(chan struct{})}
	go h.follow(s, out)
	return h, nil
}

func (h *CommandHandle) follow(s eventStream, out outputs) {
	defer close(h.done)
	defer h.cancel()
	defer s.Close()
	for s.Receive() {
		ev := s.event()
		if d := ev.GetData(); d != nil {
			h.data(d, out)
		}
		if end := ev.GetEnd(); end != nil {
			h.mu.Lock()
			h.result = &CommandResult{ExitCode: int(end.GetExitCode()), Error: end.GetError(), Stdout: h.stdout.String(), Stderr: h.stderr.String()}
			h.mu.Unlock()
		}
	}
	err := s.Err()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil && !h.disconnected && h.result == nil {
		h.err = err
	}
}

func (h *CommandHandle) data(d *process.ProcessEvent_DataEvent, out outputs) {
	write := func(buf *bytes.Buffer, w io.Writer, p []byte) {
		if buf != nil {
			h.mu.Lock()
			buf.Write(p)
			h.mu.Unlock()
		}
		if w != nil {
			w.Write(p)
		}
	}
	switch o := d.GetOutput().(type) {
	case *process.ProcessEvent_DataEvent_Stdout:
		write(&h.stdout, out.stdout, o.Stdout)
	case *process.ProcessEvent_DataEvent_Stderr:
		write(&h.stderr, out.stderr, o.Stderr)
	case *process.ProcessEvent_DataEvent_Pty:
		write(nil, out.pty, o.Pty)
	}
}

// Wait waits for the command to end and returns its result: a *CommandExitError when the exit
// code is not zero, a *TimeoutError when the command's timeout elapsed or the sandbox went
// away. It returns ctx's error, wrapped, when ctx ends first.
func (h *CommandHandle) Wait(ctx context.Context) (*CommandResult, error) {
	select {
	case <-h.done:
	case <-ctx.Done():
		return nil, transportError(ctx, ctx.Err())
	}
	h.mu.Lock()
	res, err := h.result, h.err
	h.mu.Unlock()
	switch {
	case err != nil:
		return nil, h.e.rpcError(err, nil)
	case res == nil:
		return nil, &SandboxError{Message: "Process exited without a result"}
	case res.ExitCode != 0:
		return nil, newCommandExitError(*res)
	}
	return res, nil
}

// Stdout is the standard output received so far.
func (h *CommandHandle) Stdout() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stdout.String()
}

// Stderr is the standard error received so far.
func (h *CommandHandle) Stderr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stderr.String()
}

// ExitCode is the command's exit code once it has ended; ok is false before.
func (h *CommandHandle) ExitCode() (code int, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.result == nil {
		return 0, false
	}
	return h.result.ExitCode, true
}

// Disconnect stops following the command; the command keeps running (Connect attaches again).
func (h *CommandHandle) Disconnect() {
	h.mu.Lock()
	h.disconnected = true
	h.mu.Unlock()
	h.cancel()
	<-h.done
}

// Kill kills the command (SIGKILL); false when it had already ended.
func (h *CommandHandle) Kill(ctx context.Context) (bool, error) { return h.e.kill(ctx, h.PID) }

// SendStdin writes data to the command's standard input (started with Stdin true).
func (h *CommandHandle) SendStdin(ctx context.Context, data []byte) error {
	return h.e.sendInput(ctx, h.PID, &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: data}})
}

// CloseStdin closes the command's standard input.
func (h *CommandHandle) CloseStdin(ctx context.Context) error {
	return (&Commands{e: h.e}).CloseStdin(ctx, h.PID)
}
