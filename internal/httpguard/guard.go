// Package httpguard keeps a client from holding Warren's HTTP server
// connections: it caps the connections open at once from one client
// address, and cuts request bodies that arrive slower than a minimum pace.
// Together with http.Server's ReadHeaderTimeout (slow headers) and
// IdleTimeout (idle keep-alive connections), which warren serve sets, no
// connection stays open unless its client makes progress or a response is
// under way.
//
// It does not time responses: a stream of process output, a file watch or
// an upgraded (WebSocket) connection may be silent for as long as it
// likes, since its client asked for it and the cap bounds how many one
// client holds. It owns no goroutines.
package httpguard

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/logkey"
)

// Config configures a Guard. The zero value guards nothing.
type Config struct {
	// MaxConnsPerClient caps the connections open at once from one client
	// address (one /64 for IPv6). A connection beyond it is answered 429
	// to its first request and closed within OverCapGrace. 0 or negative
	// = no cap.
	MaxConnsPerClient int
	// BodyTimeout and BodyMinBytes are the minimum pace of a request
	// body: from the handler's first read, each BodyMinBytes of it (or
	// its end) must arrive within BodyTimeout, else it is cut and the
	// request answered 408. A body of any size passes at any pace above
	// that. Until the handler reads, BodyTimeout also bounds net/http's
	// own reading of the body (it takes up to 256 KiB of a body a handler
	// left before it answers); a handler that returns without reading
	// the body to its end gets its answer sent with Connection: close
	// unless the rest arrives at once. BodyTimeout 0 or negative = no
	// minimum; BodyMinBytes <= 0 is taken as 1.
	BodyTimeout  time.Duration
	BodyMinBytes int64
	// OverCapGrace is how long a connection over the cap may live: enough
	// for a TLS handshake and one request. Default 5s.
	OverCapGrace time.Duration
	Logger       *slog.Logger // nil = discard
}

// Guard applies a Config to one or more servers' listeners and handlers;
// connections are counted across all of them. It is safe for concurrent
// use.
type Guard struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex           // guards conns
	conns map[netip.Prefix]int // client → connections open under the cap
}

// New returns a Guard.
func New(cfg Config) *Guard {
	if cfg.OverCapGrace <= 0 {
		cfg.OverCapGrace = 5 * time.Second
	}
	if cfg.BodyMinBytes <= 0 {
		cfg.BodyMinBytes = 1
	}
	return &Guard{cfg: cfg, log: logkey.For(cfg.Logger, "httpguard"), conns: map[netip.Prefix]int{}}
}

// Configure makes srv's connections guarded: its handler is wrapped and
// its ConnContext set. Serve it on a listener from Listen.
func (g *Guard) Configure(srv *http.Server) {
	srv.Handler = g.Handler(srv.Handler)
	srv.ConnContext = g.connContext
}

// Listen returns ln counting its connections against the per-client cap.
func (g *Guard) Listen(ln net.Listener) net.Listener {
	if g.cfg.MaxConnsPerClient <= 0 {
		return ln
	}
	return &listener{Listener: ln, g: g}
}

// Handler answers the requests of connections over the cap with 429 and
// paces request bodies; the rest goes to h.
func (g *Guard) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if client, over := r.Context().Value(overCapKey{}).(netip.Prefix); over {
			g.log.DebugContext(r.Context(), "connection over the per-client cap refused", "client", client.String())
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusTooManyRequests, fmt.Sprintf(
				"Too many connections from your address: at most %d may be open at once", g.cfg.MaxConnsPerClient))
			return
		}
		if g.cfg.BodyTimeout <= 0 || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		g.servePaced(h, w, r)
	})
}

// connContext marks the requests of a connection over the cap.
func (g *Guard) connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if gc, ok := c.(*conn); ok && gc.over {
		return context.WithValue(ctx, overCapKey{}, gc.client)
	}
	return ctx
}

type overCapKey struct{}

// writeError answers E2B's {code, message} error.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	httpedge.WriteJSON(w, status, httpedge.Body{Code: status, Message: msg})
}
