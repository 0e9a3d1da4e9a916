package httpguard

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// listener counts accepted connections per client.
type listener struct {
	net.Listener
	g *Guard
}

// Accept returns every connection: one over the cap still gets its 429
// (Handler) and lives at most OverCapGrace, so that the client learns why
// rather than seeing a reset, and a flood of them holds nothing for long.
func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	client := clientOf(c.RemoteAddr())
	gc := &conn{Conn: c, g: l.g, client: client}
	if !l.g.acquire(client) {
		gc.over, gc.limit = true, time.Now().Add(l.g.cfg.OverCapGrace)
		_ = c.SetDeadline(gc.limit)
	}
	return gc, nil
}

// clientOf is the client a remote address belongs to: the address, or its
// /64 for IPv6, a network's usual share of addresses.
func clientOf(a net.Addr) netip.Prefix {
	var ip netip.Addr
	if tcp, ok := a.(*net.TCPAddr); ok {
		ip = tcp.AddrPort().Addr().Unmap()
	} else if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		ip = ap.Addr().Unmap()
	}
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits) // an invalid ip gives the zero prefix: one shared client
	return p
}

// acquire counts a connection of client unless it already has the most
// allowed; it reports whether it did.
func (g *Guard) acquire(client netip.Prefix) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conns[client] >= g.cfg.MaxConnsPerClient {
		return false
	}
	g.conns[client]++
	return true
}

func (g *Guard) release(client netip.Prefix) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conns[client]--; g.conns[client] <= 0 {
		delete(g.conns, client)
	}
}

// conn is an accepted connection. One over the cap is not counted, and its
// deadlines never reach past its limit, whatever the server sets.
type conn struct {
	net.Conn
	g      *Guard
	client netip.Prefix
	over   bool
	limit  time.Time // over only
	once   sync.Once
}

func (c *conn) Close() error {
	c.once.Do(func() {
		if !c.over {
			c.g.release(c.client)
		}
	})
	return c.Conn.Close()
}

func (c *conn) clamp(t time.Time) time.Time {
	if c.over && (t.IsZero() || t.After(c.limit)) {
		return c.limit
	}
	return t
}

func (c *conn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.clamp(t)) }
func (c *conn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.clamp(t)) }
func (c *conn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.clamp(t)) }

// CloseWrite passes a half close on (an upgraded connection's end).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return net.ErrClosed
}
