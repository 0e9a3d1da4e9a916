package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/warrenhq/warren/internal/agentclient"
	"github.com/warrenhq/warren/internal/sandbox"
)

const (
	testDomain = "warren.test"
	testSecret = "agent-secret"
)

// fakeRouter serves sandboxes from a map; IDs in errs fail with that error.
// A paused sandbox whose request is admitted is resumed (it becomes
// running), and counted in resumes.
type fakeRouter struct {
	mu      sync.Mutex
	sbs     map[string]sandbox.Sandbox
	errs    map[string]error
	resumes int
}

func (f *fakeRouter) resumed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resumes
}

func (f *fakeRouter) Route(_ context.Context, id string, admit func(sandbox.Sandbox) error) (sandbox.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs[id]; err != nil {
		return sandbox.Sandbox{}, err
	}
	sb, ok := f.sbs[id]
	if !ok {
		return sandbox.Sandbox{}, sandbox.Errorf(sandbox.KindNotFound, "sandbox %q not found", id)
	}
	if admit != nil {
		if err := admit(sb); err != nil {
			return sandbox.Sandbox{}, err
		}
	}
	if sb.State == sandbox.StatePaused {
		sb.State = sandbox.StateRunning
		f.sbs[id] = sb
		f.resumes++
	}
	return sb, nil
}

func (f *fakeRouter) Find(_ context.Context, match func(sandbox.Sandbox) bool) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, sb := range f.sbs {
		if match(sb) {
			return id, nil
		}
	}
	return "", sandbox.Errorf(sandbox.KindNotFound, "no sandbox matches")
}

// fakeAgent is an httptest server standing in for a sandbox's agent: its
// own handler for the agent port, and the tunnel protocol to "ports inside
// the sandbox", which are other local test servers.
type fakeAgent struct {
	srv   *httptest.Server
	mu    sync.Mutex
	ports map[int]string // port inside → address of the server behind it
}

func newFakeAgent(t *testing.T, agent http.Handler) *fakeAgent {
	a := &fakeAgent{ports: map[int]string{}}
	mux := http.NewServeMux()
	mux.Handle("/", agent)
	mux.HandleFunc("GET /_warren/tunnel", a.tunnel)
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

// listen makes port inside the sandbox answer with h.
func (a *fakeAgent) listen(t *testing.T, port int, h http.Handler) *httptest.Server {
	return a.inside(t, port, httptest.NewServer(h))
}

// listenTLS makes port inside the sandbox answer with h over TLS, with a
// self-signed certificate.
func (a *fakeAgent) listenTLS(t *testing.T, port int, h http.Handler) *httptest.Server {
	return a.inside(t, port, httptest.NewTLSServer(h))
}

// inside puts srv behind port inside the sandbox until the test ends.
func (a *fakeAgent) inside(t *testing.T, port int, srv *httptest.Server) *httptest.Server {
	t.Cleanup(srv.Close)
	a.mu.Lock()
	a.ports[port] = srv.Listener.Addr().String()
	a.mu.Unlock()
	return srv
}

func (a *fakeAgent) addr() string { return a.srv.Listener.Addr().String() }

func (a *fakeAgent) tunnel(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Warren-Agent-Secret") != testSecret || r.Header.Get("Upgrade") != "warren-tunnel" {
		http.Error(w, `{"message":"bad tunnel request"}`, http.StatusForbidden)
		return
	}
	port, _ := strconv.Atoi(r.URL.Query().Get("port"))
	a.mu.Lock()
	addr, ok := a.ports[port]
	a.mu.Unlock()
	var inside net.Conn
	var err error
	if ok {
		inside, err = net.Dial("tcp", addr)
	}
	if !ok || err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, `{"message":"connection refused"}`)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		inside.Close()
		return
	}
	io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: warren-tunnel\r\n\r\n")
	go func() {
		io.Copy(inside, brw)
		inside.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(conn, inside)
	conn.Close()
	inside.Close()
}

// testEnv is a proxy in front of one fake sandbox.
type testEnv struct {
	proxy   *Proxy
	streams *Streams
	front   *httptest.Server
	router  *fakeRouter
	agent   *fakeAgent
	id      string
}

func newTestEnv(t *testing.T, agent http.Handler, edit func(*sandbox.Sandbox)) *testEnv {
	t.Helper()
	env := &testEnv{agent: newFakeAgent(t, agent), id: "isbx1"}
	sb := sandbox.Sandbox{ID: env.id, State: sandbox.StateRunning, AgentAddr: env.agent.addr(), AgentSecret: testSecret}
	if edit != nil {
		edit(&sb)
	}
	env.router = &fakeRouter{sbs: map[string]sandbox.Sandbox{env.id: sb}, errs: map[string]error{}}
	env.streams = NewStreams(nil)
	p, err := New(Config{Domain: testDomain, Router: env.router, Tunnels: agentclient.New(), Streams: env.streams})
	if err != nil {
		t.Fatal(err)
	}
	env.proxy = p
	env.front = httptest.NewServer(p)
	t.Cleanup(env.front.Close)
	return env
}

// request builds a request to the proxy with the given Host header.
func (e *testEnv) request(t *testing.T, method, host, path string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.front.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	return req
}

func (e *testEnv) host(port int) string {
	return strconv.Itoa(port) + "-" + e.id + "." + testDomain
}
