package jupyter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// ErrClosed is returned by requests on a closed client.
var ErrClosed = errors.New("jupyter: client closed")

// Client is connected to one kernel's shell and iopub channels. Messages
// are routed to subscribers by their parent's msg_id, so replies and
// broadcasts about a request reach whoever sent it. Safe for concurrent use.
type Client struct {
	key     []byte
	session string
	log     *slog.Logger

	shell zmq4.Socket
	iopub zmq4.Socket

	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	subs   map[string]*subscription // guarded by mu; keyed by request msg_id
	closed bool                     // guarded by mu
	err    error                    // guarded by mu; why the readers stopped
}

type subscription struct {
	ch   chan *Message
	done chan struct{}
}

// Dial connects to a kernel described by info. The kernel may still be
// starting; ZeroMQ connects once it listens. Use WaitReady before sending
// requests whose broadcasts matter.
func Dial(info ConnectionInfo, log *slog.Logger) (*Client, error) {
	ctx, cancel := context.WithCancel(context.Background())
	opts := []zmq4.Option{
		zmq4.WithDialerRetry(20 * time.Millisecond),
		zmq4.WithDialerMaxRetries(1500), // 30 s for a slow kernel start
		zmq4.WithAutomaticReconnect(false),
	}
	c := &Client{
		key:     []byte(info.Key),
		session: NewID(),
		log:     log,
		shell:   zmq4.NewDealer(ctx, opts...),
		iopub:   zmq4.NewSub(ctx, opts...),
		cancel:  cancel,
		subs:    map[string]*subscription{},
	}
	if err := c.iopub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		c.Close()
		return nil, fmt.Errorf("jupyter: subscribe iopub: %w", err)
	}
	if err := c.iopub.Dial(info.endpoint(info.IOPubPort)); err != nil {
		c.Close()
		return nil, fmt.Errorf("jupyter: dial iopub: %w", err)
	}
	if err := c.shell.Dial(info.endpoint(info.ShellPort)); err != nil {
		c.Close()
		return nil, fmt.Errorf("jupyter: dial shell: %w", err)
	}
	c.wg.Go(func() { c.read(c.shell) })
	c.wg.Go(func() { c.read(c.iopub) })
	return c, nil
}

// Close disconnects and waits for the readers to stop.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.shell.Close()
	c.iopub.Close()
	c.wg.Wait()
	return nil
}

// Request is one request in flight: the stream of messages whose parent
// it is, on any channel.
type Request struct {
	ID  string
	c   *Client
	sub *subscription
}

// Send signs and sends a request on the shell channel. The caller must
// Stop the returned request when done with it.
func (c *Client) Send(msgType string, content any) (*Request, error) {
	m, err := NewMessage(c.session, msgType, content)
	if err != nil {
		return nil, err
	}
	frames, err := m.Frames(c.key)
	if err != nil {
		return nil, err
	}
	r := &Request{ID: m.Header.MsgID, c: c, sub: &subscription{ch: make(chan *Message, 64), done: make(chan struct{})}}
	c.mu.Lock()
	if c.closed || c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, errors.Join(ErrClosed, err)
	}
	c.subs[r.ID] = r.sub
	c.mu.Unlock()
	if err := c.shell.Send(zmq4.NewMsgFrom(frames...)); err != nil {
		r.Stop()
		return nil, fmt.Errorf("jupyter: send %s: %w", msgType, err)
	}
	return r, nil
}

// Next returns the next message about the request. It fails with ErrClosed
// once the connection to the kernel is lost, or with ctx's error.
func (r *Request) Next(ctx context.Context) (*Message, error) {
	select {
	case m := <-r.sub.ch:
		return m, nil
	default:
	}
	select {
	case m := <-r.sub.ch:
		return m, nil
	case <-r.sub.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Stop stops routing messages to the request.
func (r *Request) Stop() {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	if r.c.subs[r.ID] == r.sub {
		delete(r.c.subs, r.ID)
		close(r.sub.done)
	}
}

// read routes every message of one socket to the subscriber of its parent;
// messages nobody waits for (startup status, replies to abandoned requests)
// are dropped.
func (c *Client) read(sock zmq4.Socket) {
	for {
		raw, err := sock.Recv()
		if err != nil {
			c.stop(err)
			return
		}
		m, err := Parse(raw.Frames, c.key)
		if err != nil {
			c.log.Warn("dropping kernel message", "err", err)
			continue
		}
		c.mu.Lock()
		sub := c.subs[m.Parent.MsgID]
		c.mu.Unlock()
		if sub == nil {
			continue
		}
		select {
		case sub.ch <- m:
		case <-sub.done:
		}
	}
}

func (c *Client) stop(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && !c.closed {
		c.err = err
		c.log.Debug("kernel connection lost", "err", err)
	}
	// Wake every subscriber: nothing more will arrive.
	for id, sub := range c.subs {
		close(sub.done)
		delete(c.subs, id)
	}
}
