package proxy

import (
	"errors"
	"log/slog"
	"net"
	"sync"

	"github.com/warrenhq/warren/internal/logkey"
)

// Streams are the upstream connections a Proxy holds open to each
// sandbox, so that Disconnect can cut them all when the sandbox stops.
// They are made apart from the Proxy: the lifecycle manager, which the
// Proxy routes through, is told whom to notify of stops before the Proxy
// exists, so it gets Disconnect and the Proxy gets the Streams.
type Streams struct {
	log       *slog.Logger
	mu        sync.Mutex                           // guards bySandbox
	bySandbox map[string]map[*trackedConn]struct{} // sandbox ID → open conns
}

// NewStreams returns an empty set; log (nil = discard) hears of cuts.
func NewStreams(log *slog.Logger) *Streams {
	return &Streams{log: logkey.For(log, "proxy"), bySandbox: map[string]map[*trackedConn]struct{}{}}
}

// Disconnect cuts every open connection to a sandbox: streams in flight
// end abruptly (a truncated body or a dropped upgraded connection, never a
// clean end of body) and idle pooled connections go. The lifecycle manager
// calls it when a sandbox stops, and before it pauses one.
func (s *Streams) Disconnect(sandboxID string) {
	if n := s.closeAll(sandboxID); n > 0 {
		s.log.Debug("cut connections", logkey.Sandbox, sandboxID, "conns", n)
	}
}

// track registers c as a connection to sandboxID until it is closed.
func (s *Streams) track(sandboxID string, c net.Conn) net.Conn {
	tc := &trackedConn{Conn: c, set: s, sandboxID: sandboxID}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.bySandbox[sandboxID]
	if m == nil {
		m = map[*trackedConn]struct{}{}
		s.bySandbox[sandboxID] = m
	}
	m[tc] = struct{}{}
	return tc
}

func (s *Streams) forget(tc *trackedConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.bySandbox[tc.sandboxID]
	delete(m, tc)
	if len(m) == 0 {
		delete(s.bySandbox, tc.sandboxID)
	}
}

// closeAll closes every connection to sandboxID and returns how many.
func (s *Streams) closeAll(sandboxID string) int {
	s.mu.Lock()
	m := s.bySandbox[sandboxID]
	delete(s.bySandbox, sandboxID)
	s.mu.Unlock()
	for tc := range m {
		tc.abort()
	}
	return len(m)
}

// trackedConn is an upstream connection that leaves its set when closed.
type trackedConn struct {
	net.Conn
	set       *Streams
	sandboxID string
	once      sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.set.forget(c) })
	return c.Conn.Close()
}

// abort closes the connection with a TCP reset where possible: the far
// side is a sandbox going away, there is nothing left to flush.
func (c *trackedConn) abort() {
	if tcp, ok := c.Conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = c.Conn.Close()
}

// CloseWrite passes a half close on, so that a WebSocket or raw upgrade
// whose client stops sending tells the server inside.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
