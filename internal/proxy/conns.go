package proxy

import (
	"errors"
	"net"
	"sync"
)

// connSet tracks the upstream connections open to each sandbox, so that
// Disconnect can cut them all when the sandbox stops.
type connSet struct {
	mu        sync.Mutex                           // guards bySandbox
	bySandbox map[string]map[*trackedConn]struct{} // sandbox ID → open conns
}

func newConnSet() *connSet {
	return &connSet{bySandbox: map[string]map[*trackedConn]struct{}{}}
}

// track registers c as a connection to sandboxID until it is closed.
func (s *connSet) track(sandboxID string, c net.Conn) net.Conn {
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

func (s *connSet) forget(tc *trackedConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.bySandbox[tc.sandboxID]
	delete(m, tc)
	if len(m) == 0 {
		delete(s.bySandbox, tc.sandboxID)
	}
}

// closeAll closes every connection to sandboxID and returns how many.
func (s *connSet) closeAll(sandboxID string) int {
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
	set       *connSet
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
