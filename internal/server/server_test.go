package server

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

// noTunnels refuses every tunnel; these tests never reach a port.
type noTunnels struct{}

func (noTunnels) DialTunnel(context.Context, string, string, int) (net.Conn, error) {
	return nil, errors.New("no tunnels in tests")
}

// testConfig serves on 127.0.0.1:0 with a state dir of the test's.
func testConfig(t *testing.T) Config {
	set := lifecycle.DefaultSettings()
	set.WarmPool, set.WarmPoolCodeInterpreter = 0, 0
	return Config{Addr: "127.0.0.1:0", Domain: "localhost", StateDir: t.TempDir(), Lifecycle: set}
}

// testDeps are the fake engine and a SQLite store of the test's, closed
// at its end.
func testDeps(t *testing.T) Deps {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return Deps{Store: st, Runtime: fake.New("warren/base"), Agent: fake.NewAgent(), Tunnels: noTunnels{}}
}

// openTest opens a Server on the fake engine, closed at the test's end.
func openTest(t *testing.T, tweak func(*Config)) *Server {
	t.Helper()
	cfg := testConfig(t)
	if tweak != nil {
		tweak(&cfg)
	}
	srv := New(cfg, testDeps(t))
	if err := srv.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// Open returns once the port listens, and URL names it; Close stops it,
// and Done says so.
func TestOpenClose(t *testing.T) {
	srv := New(testConfig(t), testDeps(t))
	if srv.URL() != "" {
		t.Errorf("URL before Open: %q", srv.URL())
	}
	if err := srv.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := http.Get(srv.URL() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 204 {
		t.Errorf("health: %d, want 204", res.StatusCode)
	}
	select {
	case <-srv.Done():
		t.Fatal("Done before Close")
	default:
	}
	var out, errOut bytes.Buffer
	srv.PrintHello(t.Context(), &out, &errOut)
	if !strings.Contains(out.String(), "export E2B_API_URL="+srv.URL()+"\n") || !strings.Contains(errOut.String(), "no API keys yet") {
		t.Errorf("hello:\n%s\n%s", out.String(), errOut.String())
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	<-srv.Done()
	if _, err := http.Get(srv.URL() + "/health"); err == nil {
		t.Error("the port still answers after Close")
	}
}

// An Open that fails says why and leaves nothing in the way of the next
// one on the same state dir.
func TestOpenFailsCleanly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := testConfig(t)
	cfg.Addr = ln.Addr().String() // taken
	if err := New(cfg, testDeps(t)).Open(t.Context()); err == nil {
		t.Fatal("Open on a taken address succeeded")
	}
	cfg.Addr = "127.0.0.1:0"
	srv := New(cfg, testDeps(t))
	if err := srv.Open(t.Context()); err != nil {
		t.Fatalf("Open after a failed one: %v", err)
	}
	srv.Close()

	cfg.Lifecycle.MaxFrozen = 0
	err = New(cfg, testDeps(t)).Open(t.Context())
	var se *lifecycle.SettingError
	if !errors.As(err, &se) || se.Name != "max-frozen" {
		t.Errorf("Open with invalid settings: %v, want the setting named", err)
	}
	if err := New(cfg, Deps{}).Open(t.Context()); err == nil || !strings.Contains(err.Error(), "required") {
		t.Errorf("Open without an engine: %v", err)
	}
}
