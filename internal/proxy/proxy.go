// Package proxy is Warren's data plane: it routes client requests to ports
// of sandboxes, by the E2b-Sandbox-Id/E2b-Sandbox-Port headers or by a
// <port>-<id>.<domain> host, the way E2B's proxy does.
//
// Port 49983 goes straight to the agent's published address; every other
// port is tunnelled through the agent, which dials it inside the sandbox.
// A port the sandbox's network settings list in httpsPorts is spoken to
// over TLS, its certificate not verified (E2B's rule: self-signed ones
// work); the client's side is whatever it connected with.
// Bodies stream both ways unbuffered and upgrades (WebSocket) pass through.
// The proxy enforces traffic tokens and keeps the agent's internal paths
// private, answers E2B's 502/403 JSON errors, and cuts a sandbox's open
// streams when the lifecycle manager says it stopped (Streams.Disconnect). It owns
// no sandbox state: it asks a Router, which may resume a paused sandbox,
// but only for a request that passes the sandbox's own checks (its traffic
// token; for the agent, envd's rules from package envdauth). Health checks
// and CORS preflights of a paused sandbox are answered without waking it.
package proxy

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/agentclient"
	"github.com/warrenhq/warren/internal/envdauth"
	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Router finds the sandbox a request is for. The lifecycle manager
// implements it.
type Router interface {
	// Route returns the sandbox running, resuming it first when it is
	// paused and allows auto-resume. An unknown or stopped sandbox is an
	// error of kind NotFound or Unavailable. admit, when not nil, is
	// called with the sandbox before anything is done for it: its error
	// is returned as is and a paused sandbox stays paused.
	Route(ctx context.Context, sandboxID string, admit func(sandbox.Sandbox) error) (sandbox.Sandbox, error)
	// Find returns the ID of a running or paused sandbox, of any team,
	// that match accepts; an error of kind NotFound when none does.
	Find(ctx context.Context, match func(sandbox.Sandbox) bool) (string, error)
}

// Tunneler opens byte streams to ports inside sandboxes through their
// agents. *agentclient.Client implements it; its errors match
// agentclient.ErrPortClosed when nothing listens on the port.
type Tunneler interface {
	DialTunnel(ctx context.Context, addr, secret string, port int) (net.Conn, error)
}

// Config configures a Proxy.
type Config struct {
	// Domain is the sandbox domain: hosts are <port>-<id>.<Domain> and the
	// shared host is sandbox.<Domain>. Required.
	Domain  string
	Router  Router   // required
	Tunnels Tunneler // required
	// Streams tracks the connections to sandboxes, for the lifecycle
	// manager to cut (Streams.Disconnect). Required.
	Streams *Streams
	// DialTimeout bounds reaching the agent and opening a tunnel. Default
	// DefaultDialTimeout.
	DialTimeout time.Duration
	Logger      *slog.Logger // nil = discard
}

// DefaultDialTimeout is Config.DialTimeout's default.
const DefaultDialTimeout = 10 * time.Second

// Proxy is the data-plane http.Handler. It is safe for concurrent use.
type Proxy struct {
	cfg   Config
	log   *slog.Logger
	rp    *httputil.ReverseProxy
	conns *Streams
}

// New returns a Proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.Domain == "" || cfg.Router == nil || cfg.Tunnels == nil || cfg.Streams == nil {
		return nil, errors.New("proxy: Domain, Router, Tunnels and Streams are required")
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	p := &Proxy{cfg: cfg, log: logkey.For(cfg.Logger, "proxy"), conns: cfg.Streams}
	transport := &http.Transport{
		Proxy:                 nil, // sandboxes are local; never go through HTTP_PROXY
		DialContext:           p.dial,
		DialTLSContext:        p.dialTLS,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       60 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true, // pass encodings through untouched
		WriteBufferSize:       64 << 10,
		ReadBufferSize:        64 << 10,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       p.rewrite,
		Transport:     transport,
		FlushInterval: -1,
		BufferPool:    newBufferPool(),
		ErrorHandler:  p.upstreamError,
		ErrorLog:      slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	return p, nil
}

// target is what the dialer needs to know about a request, carried in its
// context from ServeHTTP.
type target struct {
	sandboxID string
	agentAddr string
	secret    string
	port      int
	mask      string // the sandbox's maskRequestHost, "" = keep the host
	tls       bool   // the port is one of the sandbox's httpsPorts
	// serverName is the name a TLS port is asked for: the host the
	// service sees, without its port.
	serverName string
}

type targetKey struct{}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	dst, err := route(r, p.cfg.Domain)
	if err != nil && signedFiles(r) {
		if dst, err = p.routeSigned(r); err != nil {
			code := http.StatusServiceUnavailable
			if sandbox.KindOf(err) == sandbox.KindNotFound {
				code = http.StatusNotFound
			}
			writeError(w, r, errorBody{Message: err.Error(), Code: code})
			return
		}
	}
	if err != nil {
		writeError(w, r, errorBody{Message: err.Error(), Code: http.StatusBadRequest})
		return
	}
	// Checked before routing, so that such a request never resumes a
	// paused sandbox.
	if dst.port == sandbox.AgentPort && isInternalPath(r.URL.Path) {
		writeError(w, r, errorBody{SandboxID: dst.sandboxID, Message: "This path is not available from outside the sandbox", Code: http.StatusForbidden})
		return
	}
	// Credentials are judged before the sandbox is resumed: only a request
	// that passes the sandbox's own checks may wake a paused one.
	admit := func(sb sandbox.Sandbox) error { return checkTrafficToken(r, sb.TrafficAccessToken) }
	if dst.port == sandbox.AgentPort {
		admit = func(sb sandbox.Sandbox) error { return admitToAgent(r, sb) }
	}
	sb, err := p.cfg.Router.Route(r.Context(), dst.sandboxID, admit)
	if errors.Is(err, errPreflight) {
		envdauth.Preflight(w, r)
		return
	}
	if refused, ok := errors.AsType[refusal](err); ok {
		body := errorBody{SandboxID: dst.sandboxID, Message: refused.msg, Code: refused.code}
		if dst.port == sandbox.AgentPort {
			body.SandboxID = "" // the agent's own shape
		}
		writeError(w, r, body)
		return
	}
	if err != nil || sb.AgentAddr == "" {
		p.notRunning(w, r, dst, err)
		return
	}
	t := target{sandboxID: sb.ID, agentAddr: sb.AgentAddr, secret: sb.AgentSecret, port: dst.port}
	if dst.port != sandbox.AgentPort {
		t.mask = sb.Network.MaskRequestHost
		if t.tls = slices.Contains(sb.Network.HTTPSPorts, dst.port); t.tls {
			t.serverName = upstreamHost(r.Host, t.mask, t.port)
			if h, _, err := net.SplitHostPort(t.serverName); err == nil {
				t.serverName = h
			}
		}
	}
	// Let a streaming response and the request body flow at once.
	_ = http.NewResponseController(w).EnableFullDuplex()
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, t)))
}

func (p *Proxy) notRunning(w http.ResponseWriter, r *http.Request, dst destination, err error) {
	switch k := sandbox.KindOf(err); {
	case err == nil: // running but no agent address: treat as gone
	case k == sandbox.KindNotFound, k == sandbox.KindUnavailable:
		p.log.DebugContext(r.Context(), "sandbox not routable", logkey.Sandbox, dst.sandboxID, "err", err)
	case k == sandbox.KindLimited:
		// An auto-resume past the team's quota: the sandbox stays paused.
		w.Header().Set("Retry-After", strconv.Itoa(int(max(sandbox.RetryAfter(err), time.Second)/time.Second)))
		writeError(w, r, errorBody{SandboxID: dst.sandboxID, Message: sandbox.Message(err), Code: http.StatusTooManyRequests})
		return
	default:
		p.log.WarnContext(r.Context(), "routing failed", logkey.Sandbox, dst.sandboxID, "err", err)
	}
	writeError(w, r, errorBody{SandboxID: dst.sandboxID, Message: "The sandbox was not found", Code: http.StatusBadGateway})
}

// routeSigned finds the agent of the sandbox whose access token signed the
// /files URL of r (see signedFiles): one signature check per running or
// paused sandbox, a few milliseconds for thousands.
func (p *Proxy) routeSigned(r *http.Request) (destination, error) {
	id, err := p.cfg.Router.Find(r.Context(), func(sb sandbox.Sandbox) bool { return envdauth.Signed(r, sb.EnvdAccessToken) })
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return destination{}, sandbox.Errorf(sandbox.KindNotFound,
			"no running or paused sandbox's access token signed this URL (it names no sandbox: no E2b-Sandbox-Id header, no <port>-<id> host)")
	}
	if err != nil {
		return destination{}, err
	}
	return destination{sandboxID: id, port: sandbox.AgentPort}, nil
}

// isInternalPath reports whether p is one of the agent's paths that only
// Warren itself may call (envd's and ours), however it is spelled.
func isInternalPath(p string) bool {
	switch p = path.Clean("/" + p); p {
	case "/init", "/freeze", "/unfreeze", "/collapse", "/fsfreeze", "/fsthaw", "/upgrade", "/_warren":
		return true
	}
	return strings.HasPrefix(p, "/_warren/")
}

// checkTrafficToken returns why r may not reach a sandbox's port protected
// by token, or nil when it may.
func checkTrafficToken(r *http.Request, token string) error {
	if token == "" {
		return nil
	}
	got := r.Header.Get("E2b-Traffic-Access-Token")
	switch {
	case got == "":
		return refusal{http.StatusForbidden, "Missing traffic access token"}
	case subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1:
		return refusal{http.StatusForbidden, "Invalid traffic access token"}
	}
	return nil
}

// admitToAgent decides whether a request to the agent of a paused
// sandbox may resume it: only one its agent would accept (envdauth.Check:
// the access token, or a valid signature for /files), as the agent itself
// would judge it. Its health check is answered as a paused sandbox's (502,
// not running: what the SDK's isRunning and its probe after a dropped
// stream expect) and a CORS preflight as the agent answers it, neither
// waking it. A running sandbox's agent judges its requests itself.
func admitToAgent(r *http.Request, sb sandbox.Sandbox) error {
	switch {
	case sb.State == sandbox.StateRunning:
		return nil
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && path.Clean("/"+r.URL.Path) == "/health":
		return sandbox.Errorf(sandbox.KindUnavailable, "sandbox '%s' is paused", sb.ID)
	case envdauth.IsPreflight(r):
		return errPreflight
	}
	if err := envdauth.Check(r, sb.EnvdAccessToken, time.Now()); err != nil {
		return refusal{http.StatusUnauthorized, err.Error()}
	}
	return nil
}

// errPreflight is a CORS preflight for a paused sandbox's agent: the proxy
// answers it as the agent would.
var errPreflight = errors.New("proxy: CORS preflight for a paused sandbox")

// refusal is a request refused for its tokens: the status and message the
// client gets.
type refusal struct {
	code int
	msg  string
}

func (e refusal) Error() string { return e.msg }

// rewrite turns the client's request into the upstream one.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(targetKey{}).(target)
	// The URL host is only a connection-pool key (one pool per sandbox
	// and port); the dialer takes the real address from the context.
	scheme := "http"
	if t.tls {
		scheme = "https"
	}
	pr.SetURL(&url.URL{Scheme: scheme, Host: fmt.Sprintf("%d-%s.sandbox.invalid", t.port, t.sandboxID)})
	pr.SetXForwarded()
	pr.Out.Host = upstreamHost(pr.In.Host, t.mask, t.port)
	for _, h := range []string{headerSandboxID, headerSandboxPort, "E2b-Traffic-Access-Token"} {
		pr.Out.Header.Del(h)
	}
}

// upstreamHost is the Host a sandbox's service sees: the client's, or the
// sandbox's maskRequestHost with its ${PORT}.
func upstreamHost(client, mask string, port int) string {
	if mask == "" {
		return client
	}
	return strings.ReplaceAll(mask, "${PORT}", strconv.Itoa(port))
}

// dial connects to the sandbox named in ctx: the agent itself for its own
// port, a tunnel through it for any other.
func (p *Proxy) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	t, ok := ctx.Value(targetKey{}).(target)
	if !ok {
		return nil, errors.New("proxy: dial without a target")
	}
	// The transport detaches dials from the request's cancellation; a
	// frozen agent must not hold one forever.
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	var c net.Conn
	var err error
	if t.port == sandbox.AgentPort {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", t.agentAddr)
	} else {
		c, err = p.cfg.Tunnels.DialTunnel(ctx, t.agentAddr, t.secret, t.port)
	}
	if err != nil {
		return nil, err
	}
	return p.conns.track(t.sandboxID, c), nil
}

// dialTLS connects to an httpsPorts port of the sandbox named in ctx and
// makes the TLS handshake over the tunnel, offering the name the service
// is asked for (the Host it sees) and HTTP/1.1 only, which upgrades need.
func (p *Proxy) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := p.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		InsecureSkipVerify: true, // E2B's httpsPorts: a sandbox's certificate is not verified
		NextProtos:         []string{"http/1.1"},
	}
	if t, ok := ctx.Value(targetKey{}).(target); ok {
		cfg.ServerName = t.serverName
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("TLS handshake with the sandbox's port: %w", err)
	}
	return tc, nil
}

// upstreamError answers a request whose upstream could not be reached or
// failed before answering.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	t, _ := r.Context().Value(targetKey{}).(target)
	switch {
	case r.Context().Err() != nil:
		return // the client left; nobody to answer
	case errors.Is(err, agentclient.ErrPortClosed):
		writeError(w, r, errorBody{SandboxID: t.sandboxID, Message: "The sandbox is running but port is not open", Port: t.port, Code: http.StatusBadGateway})
	default:
		p.log.DebugContext(r.Context(), "upstream failed", logkey.Sandbox, t.sandboxID, "port", t.port, "err", err)
		writeError(w, r, errorBody{SandboxID: t.sandboxID, Message: "The sandbox was not found", Code: http.StatusBadGateway})
	}
}
