package agentclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/agent/server"
	"github.com/warrenhq/warren/internal/agent/state"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/proto/filesystem/filesystemconnect"
	"github.com/warrenhq/warren/proto/process/processconnect"
)

// newAgent returns a real agent server (stub services) and its state.
func newAgent(t *testing.T, secret string) (*server.Server, *state.State) {
	t.Helper()
	st := state.New()
	srv := server.New(server.Config{
		State:        st,
		Log:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		Process:      processconnect.UnimplementedProcessHandler{},
		Filesystem:   filesystemconnect.UnimplementedFilesystemHandler{},
		Files:        http.NotFoundHandler(),
		ServerSecret: secret,
	})
	t.Cleanup(func() { srv.Close() })
	return srv, st
}

// startAgent serves a real agent on 127.0.0.1 and returns its address.
func startAgent(t *testing.T, secret string) (string, *server.Server, *state.State) {
	t.Helper()
	srv, st := newAgent(t, secret)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts.Listener.Addr().String(), srv, st
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestInitWaitsForLateAgent starts the agent only after Init began
// polling, as when a container is still starting.
func TestInitWaitsForLateAgent(t *testing.T) {
	addr := freeAddr(t)
	srv, st := newAgent(t, "")
	go func() {
		time.Sleep(150 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listen: %v", err)
			return
		}
		srv.Serve(ln)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	init := sandbox.AgentInit{
		EnvVars:        map[string]string{"FOO": "bar"},
		AccessToken:    "tok",
		DefaultUser:    "user",
		DefaultWorkdir: "/home/user",
	}
	c := New()
	start := time.Now()
	if err := c.Init(ctx, addr, init); err != nil {
		t.Fatalf("Init: %v", err)
	}
	// Polling starts at 2 ms and backs off to 10 ms, so the agent is found
	// soon after it listens.
	if d := time.Since(start); d > 150*time.Millisecond+500*time.Millisecond {
		t.Errorf("Init took %v", d)
	}
	got := sandbox.AgentInit{EnvVars: st.EnvVars(), AccessToken: st.AccessToken(), DefaultUser: st.DefaultUser(), DefaultWorkdir: st.DefaultWorkdir()}
	if diff := cmp.Diff(init, got); diff != "" {
		t.Errorf("agent settings (-want +got):\n%s", diff)
	}

	// A second Init (a retry, a restarted server) proves the token.
	init.EnvVars = map[string]string{"FOO": "baz"}
	if err := c.Init(ctx, addr, init); err != nil {
		t.Fatalf("second Init: %v", err)
	}
	if diff := cmp.Diff(init.EnvVars, st.EnvVars()); diff != "" {
		t.Errorf("env after second Init (-want +got):\n%s", diff)
	}
	// Another token is refused.
	init.AccessToken = "other"
	if err := c.Init(ctx, addr, init); err == nil {
		t.Error("Init with another token succeeded")
	}
}

// Init proves the agent secret: an agent started with one refuses an
// init without it.
func TestInitSendsAgentSecret(t *testing.T) {
	addr, _, st := startAgent(t, "s3cret")
	c := New()
	if err := c.Init(context.Background(), addr, sandbox.AgentInit{AccessToken: "tok"}); err == nil {
		t.Fatal("Init without the agent secret succeeded")
	}
	if err := c.Init(context.Background(), addr, sandbox.AgentInit{AgentSecret: "s3cret", AccessToken: "tok"}); err != nil {
		t.Fatalf("Init with the agent secret: %v", err)
	}
	if got := st.AccessToken(); got != "tok" {
		t.Errorf("access token %q after Init, want tok", got)
	}
}

func TestInitFast(t *testing.T) {
	addr, _, _ := startAgent(t, "")
	c := New()
	start := time.Now()
	if err := c.Init(context.Background(), addr, sandbox.AgentInit{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Errorf("Init on a ready agent took %v", d)
	}
}

func TestInitGivesUp(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := New().Init(ctx, addr, sandbox.AgentInit{})
	if sandbox.KindOf(err) != sandbox.KindUnavailable || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Init with no agent = %v (kind %v)", err, sandbox.KindOf(err))
	}
}

func TestHealth(t *testing.T) {
	addr, _, _ := startAgent(t, "")
	c := New()
	if err := c.Health(context.Background(), addr); err != nil {
		t.Errorf("Health: %v", err)
	}
	if err := c.Health(context.Background(), freeAddr(t)); sandbox.KindOf(err) != sandbox.KindUnavailable {
		t.Errorf("Health of nothing = %v", err)
	}
}

// TestTunnelHTTP reaches an HTTP server bound to 127.0.0.1 through the
// tunnel, the way the proxy does.
func TestTunnelHTTP(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from "+r.URL.Path)
	}))
	defer target.Close()
	addr, _, _ := startAgent(t, "s3cret")

	conn, err := New().DialTunnel(context.Background(), addr, "s3cret", target.Listener.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil },
	}}
	resp, err := client.Get("http://sandbox/inside")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello from /inside" {
		t.Errorf("body = %q", body)
	}
	client.CloseIdleConnections()
}

func TestTunnelErrors(t *testing.T) {
	addr, _, _ := startAgent(t, "s3cret")
	c := New()
	ctx := context.Background()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	_, err = c.DialTunnel(ctx, addr, "s3cret", p)
	if !errors.Is(err, ErrPortClosed) || sandbox.KindOf(err) != sandbox.KindUnavailable {
		t.Errorf("closed port: %v", err)
	}

	_, err = c.DialTunnel(ctx, addr, "wrong", p)
	if err == nil || errors.Is(err, ErrPortClosed) || sandbox.KindOf(err) != sandbox.KindInternal {
		t.Errorf("wrong secret: %v", err)
	}

	_, err = c.DialTunnel(ctx, addr, "s3cret", 0)
	if sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("port 0: %v", err)
	}

	_, err = c.DialTunnel(ctx, freeAddr(t), "s3cret", 80)
	if sandbox.KindOf(err) != sandbox.KindUnavailable || errors.Is(err, ErrPortClosed) {
		t.Errorf("no agent: %v", err)
	}
}

// TestTunnelHandshakeCancel: an agent that never answers the upgrade must
// not hold DialTunnel past its context.
func TestTunnelHandshakeCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = New().DialTunnel(ctx, ln.Addr().String(), "s", 80)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("DialTunnel = %v, want canceled", err)
	}
}

// TestTunnelBytes sends a megabyte each way at once through an echo server.
func TestTunnelBytes(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		c, err := echo.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
		c.(*net.TCPConn).CloseWrite()
	}()
	addr, _, _ := startAgent(t, "s3cret")
	conn, err := New().DialTunnel(context.Background(), addr, "s3cret", echo.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	data := make([]byte, 1<<20)
	rand.Read(data)
	go func() {
		conn.Write(data)
		conn.(interface{ CloseWrite() error }).CloseWrite()
	}()
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("echoed %d bytes, differing from the %d sent", len(got), len(data))
	}
}

// TestTunnelHalfClose: the target speaks first and closes its writing
// side; the client must see EOF yet still be able to send, and its own
// half close must reach the target as EOF.
func TestTunnelHalfClose(t *testing.T) {
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	received := make(chan string, 1)
	go func() {
		c, err := target.Accept()
		if err != nil {
			received <- err.Error()
			return
		}
		defer c.Close()
		io.WriteString(c, "greeting")
		c.(*net.TCPConn).CloseWrite()
		data, _ := io.ReadAll(c)
		received <- string(data)
	}()
	addr, _, _ := startAgent(t, "s3cret")
	conn, err := New().DialTunnel(context.Background(), addr, "s3cret", target.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	greeting, err := io.ReadAll(conn)
	if err != nil || string(greeting) != "greeting" {
		t.Fatalf("read %q, %v", greeting, err)
	}
	if _, err := io.WriteString(conn, strings.Repeat("reply", 1000)); err != nil {
		t.Fatalf("write after the target's half close: %v", err)
	}
	if err := conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-received:
		if got != strings.Repeat("reply", 1000) {
			t.Errorf("target received %d bytes %.20q…", len(got), got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client's half close never reached the target")
	}
}
