package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/proto/process"
)

// The precondition errors are built per call: a *connect.Error carries
// response metadata, so it must not be shared between requests.
func errNoStdin() error {
	return connect.NewError(connect.CodeFailedPrecondition,
		errors.New("process has no open stdin: start it with stdin enabled, and do not close stdin before sending input"))
}

func errNoPTY() error {
	return connect.NewError(connect.CodeFailedPrecondition, errors.New("process was not started with a pty"))
}

func errIsPTY() error {
	return connect.NewError(connect.CodeFailedPrecondition, errors.New("process uses a pty: send pty input instead of stdin"))
}

// SendInput writes stdin bytes to the stdin pipe or pty bytes to the tty.
func (s *Service) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	p, err := s.find(req.Msg.GetProcess(), true)
	if err != nil {
		return nil, err
	}
	if err := p.write(ctx, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

// StreamInput takes a start event naming the process, then input events.
func (s *Service) StreamInput(ctx context.Context, stream *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	var p *proc
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *process.StreamInputRequest_Start:
			found, err := s.find(ev.Start.GetProcess(), true)
			if err != nil {
				return nil, err
			}
			p = found
		case *process.StreamInputRequest_Data:
			if p == nil {
				return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("the first event must be start, naming the process"))
			}
			if err := p.write(ctx, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.StreamInputResponse{}), nil
}

// CloseStdin closes the stdin pipe so the process reads EOF.
func (s *Service) CloseStdin(_ context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	p, err := s.find(req.Msg.GetProcess(), true)
	if err != nil {
		return nil, err
	}
	if p.tty != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("cannot close stdin of a pty process; send EOT (ctrl-d) as pty input instead"))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdin == nil {
		return nil, errNoStdin()
	}
	err = p.stdin.Close()
	p.stdin = nil
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("close stdin: %w", err))
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

// SendSignal sends SIGTERM or SIGKILL to the process's whole group, so the
// children of a `bash -c` get it too.
func (s *Service) SendSignal(_ context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case process.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	case process.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	default:
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("signal %s is not supported: only SIGTERM and SIGKILL", req.Msg.GetSignal()))
	}
	p, err := s.find(req.Msg.GetProcess(), true)
	if err != nil {
		return nil, err
	}
	// Our children are never pid 1 nor the agent, but a signal to either
	// would take the whole sandbox down, so refuse outright.
	if p.pid <= 1 || int(p.pid) == os.Getpid() {
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("refusing to signal pid %d: it is the sandbox's init or the agent", p.pid))
	}
	if err := syscall.Kill(-int(p.pid), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("signal pid %d: %w", p.pid, err))
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

// Update resizes a process's pty; without a pty in the request there is
// nothing to change.
func (s *Service) Update(_ context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	p, err := s.find(req.Msg.GetProcess(), true)
	if err != nil {
		return nil, err
	}
	if req.Msg.Pty == nil {
		return connect.NewResponse(&process.UpdateResponse{}), nil
	}
	if p.tty == nil {
		return nil, errNoPTY()
	}
	size, err := ptySize(req.Msg.Pty.GetSize(), false)
	if err != nil {
		return nil, err
	}
	if err := setSize(p.tty, size); err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("resize pty: %w", err))
	}
	return connect.NewResponse(&process.UpdateResponse{}), nil
}

// write sends one input to the process. A write the process does not read
// blocks until the caller gives up, without holding up other RPCs.
func (p *proc) write(ctx context.Context, in *process.ProcessInput) error {
	var f *os.File
	var data []byte
	switch v := in.GetInput().(type) {
	case *process.ProcessInput_Stdin:
		if p.tty != nil {
			return errIsPTY()
		}
		p.mu.Lock()
		f = p.stdin
		p.mu.Unlock()
		if f == nil {
			return errNoStdin()
		}
		data = v.Stdin
	case *process.ProcessInput_Pty:
		if p.tty == nil {
			return errNoPTY()
		}
		f, data = p.tty, v.Pty
	default:
		return connect.NewError(connect.CodeInvalidArgument, errors.New("input (stdin or pty bytes) is required"))
	}

	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	_ = f.SetWriteDeadline(time.Time{})
	interrupted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = f.SetWriteDeadline(time.Unix(1, 0))
		close(interrupted)
	})
	_, err := f.Write(data)
	if !stop() {
		<-interrupted // the next write clears the deadline this set
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrClosed) && p.tty == nil:
		return errNoStdin()
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("write input: %w", err))
	}
}
