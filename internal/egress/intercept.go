package egress

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// interception is one intercepted connection: from the sandbox at src to
// dst, for name (the TLS server name or HTTP host; "" for a TLS client
// that sent none), and whether it is TLS.
type interception struct {
	src  netip.Addr
	dst  netip.AddrPort
	name string
	tls  bool
}

// host is who the connection is for: its name, else dst's address.
func (ic interception) host() string {
	if ic.name != "" {
		return ic.name
	}
	return ic.dst.Addr().Unmap().String()
}

// Idle limits of an intercepted connection: how long the sandbox may take
// to send a request's head, and keep an idle keep-alive connection open.
const (
	headerTimeout = 30 * time.Second
	idleTimeout   = 5 * time.Minute
)

// forwardedHeaders are headers the reverse proxy would drop or rewrite;
// the sandbox's own values go on as they are.
var forwardedHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}

// intercept serves the HTTP requests of c (whose first bytes, seen, were
// read already) until it closes: TLS is terminated with a certificate of
// Warren's CA for the host, and every request goes on over the gateway's
// own connections to dst (TLS verified for the host), with the headers of
// the rules in force when it is sent. A request whose placeholders do not
// resolve is answered 502 and never sent.
func (s *Server) intercept(c net.Conn, seen []byte, ic interception) {
	up := s.openUpstream(ic)
	defer up.close()
	closed := make(chan struct{})
	conn := &replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(seen), c), closed: closed}
	var served net.Conn = conn
	scheme := "http"
	if ic.tls {
		scheme = "https"
		sb, _ := s.cfg.Policy(ic.src)
		ca := s.authority(sb)
		if ca == nil {
			reset(c)
			return
		}
		leaf, err := ca.Leaf(ic.host())
		if err != nil {
			s.log.Error("cannot issue a certificate", logkey.SandboxIP, ic.src, "host", ic.host(), "err", err)
			reset(c)
			return
		}
		tc := tls.Server(conn, &tls.Config{
			Certificates: []tls.Certificate{*leaf},
			NextProtos:   []string{"h2", "http/1.1"},
			MinVersion:   tls.VersionTLS12,
		})
		_ = c.SetDeadline(time.Now().Add(peekTimeout))
		if err := tc.Handshake(); err != nil {
			s.log.Debug("intercepted TLS handshake failed", logkey.SandboxIP, ic.src, "host", ic.host(), "err", err)
			return
		}
		_ = c.SetDeadline(time.Time{})
		served = tc
	}
	tr := up.transport()
	defer tr.CloseIdleConnections()
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = scheme, pr.In.Host, pr.In.Host
			for _, h := range forwardedHeaders {
				if v, ok := pr.In.Header[h]; ok {
					pr.Out.Header[h] = v
				}
			}
		},
		// Responses of unknown length (event streams, chunked) are
		// flushed at every write anyway; others fill the buffer first.
		Transport: tr,
		ErrorLog:  log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Debug("intercepted request failed upstream", logkey.SandboxIP, ic.src, "host", ic.host(), "err", err)
			refuse(w, http.StatusBadGateway, fmt.Sprintf("cannot reach %s: %v", ic.host(), err))
		},
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.rewrite(w, r, ic, rp) }),
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	_ = srv.Serve(&oneConnListener{c: served, closed: closed})
	<-closed
}

// rewrite applies, to one request of an intercepted connection, the rules
// the sandbox has now for the connection's host, and sends it on.
func (s *Server) rewrite(w http.ResponseWriter, r *http.Request, ic interception, rp *httputil.ReverseProxy) {
	if !sameHost(r.Host, ic.host()) {
		refuse(w, http.StatusMisdirectedRequest, fmt.Sprintf("this connection is for %s, not %s: open another one", ic.host(), r.Host))
		return
	}
	sb, ok := s.cfg.Policy(ic.src)
	if !ok {
		refuse(w, http.StatusBadGateway, "the sandbox is gone")
		return
	}
	_, rs := s.connRules(ic.src, sb, ic.dst, ic.name, ic.tls)
	headers, err := s.ruleHeaders(r.Context(), sb, rs)
	if err != nil {
		s.log.Info("request refused", logkey.Sandbox, sb.ID, "host", ic.host(), "reason", err)
		refuse(w, http.StatusBadGateway, err.Error())
		return
	}
	for _, h := range headers {
		if strings.EqualFold(h.name, "Host") {
			r.Host = h.value
			continue
		}
		r.Header[http.CanonicalHeaderKey(h.name)] = []string{h.value}
	}
	rp.ServeHTTP(w, r)
}

type header struct{ name, value string }

// ruleHeaders resolves the headers of rs, in order (a later rule's header
// replaces an earlier one's). Any placeholder that does not resolve, and
// any value that cannot be a header's, fails them all.
func (s *Server) ruleHeaders(ctx context.Context, sb Sandbox, rs []sandbox.NetworkRule) ([]header, error) {
	var out []header
	for _, r := range rs {
		for name, v := range r.Headers {
			val, err := s.expand(ctx, sb, v)
			if err != nil {
				return nil, fmt.Errorf("header %s of the sandbox's network rules: %w", name, err)
			}
			if strings.ContainsAny(val, "\r\n\x00") {
				return nil, fmt.Errorf("header %s of the sandbox's network rules resolves to a value with a line break or NUL", name)
			}
			out = append(out, header{name, val})
		}
	}
	return out, nil
}

// expand resolves the placeholders of one header value.
func (s *Server) expand(ctx context.Context, sb Sandbox, v string) (string, error) {
	if sb.Expander != nil {
		return sb.Expander.Expand(ctx, sb.ID, sb.TeamID, v)
	}
	if e := s.expander.Load(); e != nil {
		return (*e).Expand(ctx, sb.ID, sb.TeamID, v)
	}
	if strings.Contains(v, "${") {
		return "", errors.New("placeholders cannot be resolved on this server (no secrets store)")
	}
	return v, nil
}

// upstream opens the gateway's own connections of one intercepted
// connection: always to its destination, through the egress proxy when
// the sandbox has one, with TLS verified for the host. The first is
// opened at once, while the sandbox's own handshake and request are on
// their way, so that a request on a new connection waits for one
// handshake's time rather than two.
type upstream struct {
	s      *Server
	ic     interception
	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	first chan dialed // the connection opened ahead; nil once taken
}

type dialed struct {
	c   net.Conn
	err error
}

func (s *Server) openUpstream(ic interception) *upstream {
	first := make(chan dialed, 1)
	u := &upstream{s: s, ic: ic, first: first}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	go func() {
		c, err := u.dial(u.ctx)
		first <- dialed{c, err}
	}()
	return u
}

// dial opens one connection to the destination.
func (u *upstream) dial(ctx context.Context) (net.Conn, error) {
	sb, ok := u.s.cfg.Policy(u.ic.src)
	if !ok {
		return nil, errors.New("the sandbox is gone")
	}
	raw, err := u.s.dialUpstream(ctx, sb, u.ic.dst)
	if err != nil || !u.ic.tls {
		return raw, err
	}
	tc := tls.Client(raw, &tls.Config{
		ServerName: u.ic.host(),
		RootCAs:    cmp.Or(sb.RootCAs, u.s.cfg.RootCAs),
		NextProtos: []string{"h2", "http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("TLS to %s: %w", u.ic.host(), err)
	}
	return tc, nil
}

// get is the transport's dial: the connection opened ahead the first
// time (its failure too: it would fail again), a new one after.
func (u *upstream) get(ctx context.Context) (net.Conn, error) {
	u.mu.Lock()
	first := u.first
	u.first = nil
	u.mu.Unlock()
	if first == nil {
		return u.dial(ctx)
	}
	select {
	case d := <-first:
		return d.c, d.err
	case <-ctx.Done():
		go discard(first)
		return nil, ctx.Err()
	}
}

// close stops the dial ahead and closes its connection if it was never
// taken.
func (u *upstream) close() {
	u.cancel()
	u.mu.Lock()
	first := u.first
	u.first = nil
	u.mu.Unlock()
	if first != nil {
		discard(first)
	}
}

func discard(first chan dialed) {
	if d := <-first; d.c != nil {
		d.c.Close()
	}
}

// transport sends an intercepted connection's requests over u's
// connections.
func (u *upstream) transport() *http.Transport {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) { return u.get(ctx) }
	return &http.Transport{
		DialContext:         dial,
		DialTLSContext:      dial,
		ForceAttemptHTTP2:   true,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
	}
}

// refuse answers a request the gateway will not send, saying why.
func refuse(w http.ResponseWriter, code int, why string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Warren-Egress-Error", "1")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, "warren egress gateway: "+why+"\n")
}

// sameHost reports whether an HTTP Host (perhaps with a port) names host.
func sameHost(hostport, host string) bool {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(h, "]"), "["), ".")
	if a, err := netip.ParseAddr(h); err == nil {
		b, err := netip.ParseAddr(host)
		return err == nil && a.Unmap() == b.Unmap()
	}
	return strings.EqualFold(h, host)
}

// replayConn is a connection whose reads start with bytes already read
// from it, and which tells when it is closed.
type replayConn struct {
	net.Conn
	r      io.Reader
	once   sync.Once
	closed chan struct{}
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *replayConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// oneConnListener hands an http.Server one connection, then blocks until
// that connection is closed.
type oneConnListener struct {
	mu     sync.Mutex
	c      net.Conn
	closed chan struct{}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.c
	l.c = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error { return nil }

func (l *oneConnListener) Addr() net.Addr { return &net.TCPAddr{} }
