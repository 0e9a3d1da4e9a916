package agentclient

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/proto/process"
)

// PTY is a login shell on a pseudo-terminal in a sandbox, as the SDK's
// sandbox.pty.create starts one: Read returns its output, Write types
// into it, and Close kills it.
type PTY struct {
	c      *Client
	addr   string
	token  string
	user   string
	pid    uint32
	cancel context.CancelFunc
	stream *connect.ServerStreamForClient[process.StartResponse]

	mu   sync.Mutex
	rest []byte // output received but not yet read
}

// OpenPTY starts a login bash on a cols×rows terminal as user in the
// sandbox whose agent is at addr, and returns once it runs. It lives
// until Close, or until ctx ends.
func (c *Client) OpenPTY(ctx context.Context, addr, accessToken, user string, cols, rows uint32) (*PTY, error) {
	sctx, cancel := context.WithCancel(ctx)
	req := commandRequest(accessToken, user, "", "", map[string]string{"TERM": "xterm-256color"})
	req.Msg.Process.Args = []string{"-i", "-l"}
	req.Msg.Pty = &process.PTY{Size: &process.PTY_Size{Cols: cols, Rows: rows}}
	stream, err := c.process(addr).Start(sctx, req)
	if err != nil {
		cancel()
		return nil, commandError(err)
	}
	for stream.Receive() {
		if st := stream.Msg().GetEvent().GetStart(); st != nil {
			return &PTY{c: c, addr: addr, token: accessToken, user: user, pid: st.GetPid(), cancel: cancel, stream: stream}, nil
		}
	}
	err = stream.Err()
	stream.Close()
	cancel()
	if err != nil {
		return nil, commandError(err)
	}
	return nil, sandbox.Errorf(sandbox.KindInternal, "the agent ended the terminal before starting it")
}

// Read returns the terminal's next output; io.EOF once the shell ended.
func (p *PTY) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.rest) == 0 {
		if !p.stream.Receive() {
			if err := p.stream.Err(); err != nil {
				return 0, err
			}
			return 0, io.EOF
		}
		ev := p.stream.Msg().GetEvent()
		if d := ev.GetData(); d != nil {
			p.rest = append(p.rest, d.GetPty()...)
			p.rest = append(p.rest, d.GetStdout()...)
			p.rest = append(p.rest, d.GetStderr()...)
		}
		if ev.GetEnd() != nil {
			return 0, io.EOF
		}
	}
	n := copy(b, p.rest)
	p.rest = p.rest[n:]
	return n, nil
}

func (p *PTY) selector() *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: p.pid}}
}

func (p *PTY) headers(h http.Header) { setAuth(h, p.token, p.user) }

// callTimeout bounds each input, resize and kill call to the agent.
const callTimeout = 10 * time.Second

func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}

// Write types b into the terminal.
func (p *PTY) Write(b []byte) (int, error) {
	req := connect.NewRequest(&process.SendInputRequest{Process: p.selector(), Input: &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: b}}})
	p.headers(req.Header())
	ctx, cancel := callCtx()
	defer cancel()
	if _, err := p.c.process(p.addr).SendInput(ctx, req); err != nil {
		return 0, commandError(err)
	}
	return len(b), nil
}

// Resize tells the terminal its new size.
func (p *PTY) Resize(cols, rows uint32) error {
	req := connect.NewRequest(&process.UpdateRequest{Process: p.selector(), Pty: &process.PTY{Size: &process.PTY_Size{Cols: cols, Rows: rows}}})
	p.headers(req.Header())
	ctx, cancel := callCtx()
	defer cancel()
	if _, err := p.c.process(p.addr).Update(ctx, req); err != nil {
		return commandError(err)
	}
	return nil
}

// Close kills the shell and ends its stream.
func (p *PTY) Close() error {
	req := connect.NewRequest(&process.SendSignalRequest{Process: p.selector(), Signal: process.Signal_SIGNAL_SIGKILL})
	p.headers(req.Header())
	ctx, cancel := callCtx()
	defer cancel()
	_, err := p.c.process(p.addr).SendSignal(ctx, req)
	p.cancel()
	p.stream.Close()
	if err != nil {
		return commandError(err)
	}
	return nil
}
