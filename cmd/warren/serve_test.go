package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/server"
)

// lockedBuffer is a bytes.Buffer safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// noTunnels refuses every tunnel; these tests never reach a port.
type noTunnels struct{}

func (noTunnels) DialTunnel(context.Context, string, string, int) (net.Conn, error) {
	return nil, errors.New("no tunnels in tests")
}

// startServe opens warren serve's server in-process on :0 with the fake
// runtime and the store its settings name, as runServe does with Docker,
// and returns its URL and Close.
func startServe(t *testing.T, m *Main, rt *fake.Runtime, args ...string) (string, func() error) {
	t.Helper()
	cfg, err := m.parseServe(append([]string{"--addr", "127.0.0.1:0"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	st, closeStore, err := openStore(t.Context(), cfg.Store, cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(cfg, server.Deps{Store: st, Runtime: rt, Agent: fake.NewAgent(), Tunnels: noTunnels{}, Logger: slog.New(slog.NewTextHandler(m.Stderr, nil))})
	if err := srv.Open(t.Context()); err != nil {
		closeStore()
		t.Fatalf("serve: %v", err)
	}
	srv.PrintHello(t.Context(), m.Stdout, m.Stderr)
	return srv.URL(), func() error {
		defer closeStore()
		return srv.Close()
	}
}

func TestServeInProcess(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"WARREN_STATE_DIR": dir, "WARREN_MAX_TIMEOUT": "2h"}
	out := &lockedBuffer{}
	m := &Main{Stdout: out, Stderr: out, Getenv: func(k string) string { return env[k] }}
	ctx := context.Background()

	var keyOut bytes.Buffer
	km := &Main{Stdout: &keyOut, Stderr: io.Discard, Getenv: m.Getenv}
	if err := km.Run(ctx, []string{"keys", "create", "--name", "test"}); err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(keyOut.String())

	rt := fake.New("warren/base")
	url, stop := startServe(t, m, rt)
	call := func(method, path, body string, hdr map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("X-API-KEY", key)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}

	if code, _ := call("GET", "/health", "", nil); code != 204 {
		t.Errorf("health: %d", code)
	}
	// The dashboard is mounted before the control plane, from the
	// embedded build.
	if code, body := call("GET", "/dashboard/", "", nil); code != 200 || !strings.Contains(body, `<div id="app">`) {
		t.Errorf("dashboard: %d %.200s", code, body)
	}
	if code, body := call("GET", "/dashboard/api/sandboxes", "", nil); code != 401 || !strings.Contains(body, "not logged in to the dashboard") {
		t.Errorf("dashboard API without a session: %d %s", code, body)
	}
	code, body := call("POST", "/v2/sandboxes", `{"templateID":"base","timeout":3600}`, nil)
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var sb struct{ SandboxID string }
	json.Unmarshal([]byte(body), &sb)
	if code, _ := call("POST", "/v2/sandboxes", `{"timeout":7201}`, nil); code != 400 {
		t.Errorf("timeout above WARREN_MAX_TIMEOUT: %d, want 400", code)
	}
	// A request carrying routing headers goes to the proxy, not the API.
	code, body = call("GET", "/health", "", map[string]string{"E2b-Sandbox-Id": "inosuch", "E2b-Sandbox-Port": "49983"})
	if code != 502 || !strings.Contains(body, "inosuch") {
		t.Errorf("proxy mount: %d %s, want 502 naming the sandbox", code, body)
	}

	// The sandbox CLI against the running server.
	var cliOut bytes.Buffer
	cm := &Main{Stdout: &cliOut, Stderr: &cliOut, Getenv: func(k string) string {
		return map[string]string{"E2B_API_URL": url, "WARREN_API_KEY": key}[k]
	}}
	if err := cm.Run(ctx, []string{"sandbox", "pause", sb.SandboxID}); err != nil {
		t.Errorf("sandbox pause: %v\n%s", err, cliOut.String())
	}
	if err := cm.Run(ctx, []string{"sandbox", "list"}); err != nil || !strings.Contains(cliOut.String(), sb.SandboxID+"  base      paused") {
		t.Errorf("sandbox list: %v\n%s", err, cliOut.String())
	}
	if err := cm.Run(ctx, []string{"sandbox", "kill", "inosuch"}); err == nil {
		t.Error("killing an unknown sandbox succeeded")
	}
	if err := stop(); err != nil {
		t.Fatalf("serve returned %v", err)
	}

	// A new server on the same state dir and engine keeps the paused sandbox.
	url, stop = startServe(t, m, rt)
	defer stop()
	code, body = call("POST", "/sandboxes/"+sb.SandboxID+"/connect", `{"timeout":60}`, nil)
	if code != 201 {
		t.Errorf("connect after restart: %d %s, want 201 (resumed)", code, body)
	}
	if !strings.Contains(out.String(), "export E2B_API_URL="+url) {
		t.Errorf("serve did not print the SDK settings:\n%s", out.String())
	}
}

func TestKeysCommands(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"WARREN_STATE_DIR": dir}
	stdout, _, err := run(t, env, "keys", "create", "--team", "acme")
	key := strings.TrimSpace(stdout)
	if err != nil || !strings.HasPrefix(key, "e2b_") || len(key) != 44 {
		t.Fatalf("create: %q %v", stdout, err)
	}
	stdout, _, err = run(t, env, "keys", "list")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if err != nil || len(lines) != 2 || !strings.Contains(lines[1], "acme") || strings.Contains(stdout, key) {
		t.Fatalf("list: %q %v", stdout, err)
	}
	id := strings.Fields(lines[1])[0]
	if _, _, err := run(t, env, "keys", "revoke", id); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if _, _, err := run(t, env, "keys", "revoke", id); err == nil {
		t.Error("second revoke succeeded")
	}
	if _, _, err := run(t, env, "keys", "bogus"); !errors.As(err, new(usageError)) {
		t.Errorf("unknown subcommand: %v, want usage error", err)
	}
}

func TestParseServeEnv(t *testing.T) {
	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
		return map[string]string{"WARREN_ADDR": "0.0.0.0:9", "WARREN_FREEZE_MAX_AGE": "1m", "WARREN_MAX_FROZEN": "3", "WARREN_API_KEY": "e2b_ab",
			"WARREN_WARM_POOL_CODE_INTERPRETER": "3"}[k]
	}}
	cfg, err := m.parseServe([]string{"--max-frozen", "4"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "0.0.0.0:9" || cfg.Lifecycle.FreezeMaxAge != time.Minute || cfg.Lifecycle.MaxFrozen != 4 || cfg.APIKey != "e2b_ab" {
		t.Errorf("cfg = %+v", cfg)
	}
	if l := cfg.Lifecycle; l.WarmPool != lifecycle.WarmPoolAuto || l.WarmPoolCodeInterpreter != 3 {
		t.Errorf("warm pools: base %d, code interpreter %d; want auto and 3", l.WarmPool, l.WarmPoolCodeInterpreter)
	}
	if cfg, err := m.parseServe([]string{"--warm-pool=5", "--warm-pool-code-interpreter=auto"}); err != nil ||
		cfg.Lifecycle.WarmPool != 5 || cfg.Lifecycle.WarmPoolCodeInterpreter != lifecycle.WarmPoolAuto {
		t.Errorf("--warm-pool=5 --warm-pool-code-interpreter=auto: %+v, %v", cfg.Lifecycle, err)
	}
	if _, err := m.parseServe([]string{"--warm-pool=-1"}); err == nil {
		t.Error("--warm-pool=-1 accepted")
	}
	if cfg, err := m.parseServe([]string{"--warm-pool-code-interpreter=0"}); err != nil || cfg.Lifecycle.WarmPoolCodeInterpreter != 0 {
		t.Errorf("--warm-pool-code-interpreter=0: %d, %v", cfg.Lifecycle.WarmPoolCodeInterpreter, err)
	}
	for _, env := range []map[string]string{{"WARREN_MAX_FROZEN": "many"}, {"WARREN_API_KEY": "sk_x"}, {"WARREN_INIT_TIMEOUT": "soon"},
		{"WARREN_WARM_POOL_CODE_INTERPRETER": "one"}, {"WARREN_API_KEY": "e2b_AB"}} {
		m.Getenv = func(k string) string { return env[k] }
		if _, err := m.parseServe(nil); !errors.As(err, new(usageError)) {
			t.Errorf("env %v: err %v, want usage error", env, err)
		}
	}
}

// The connection flags reach the server's Config (internal/server tests
// that its port applies them).
func TestParseServeConnectionFlags(t *testing.T) {
	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
		return map[string]string{"WARREN_MAX_CONNS_PER_CLIENT": "2"}[k]
	}}
	cfg, err := m.parseServe([]string{"--idle-timeout", "300ms", "--body-timeout=2s", "--body-min-bytes=100"})
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Conns; cfg.IdleTimeout != 300*time.Millisecond || c.MaxConnsPerClient != 2 || c.BodyTimeout != 2*time.Second || c.BodyMinBytes != 100 {
		t.Errorf("idle %v, conns %+v", cfg.IdleTimeout, c)
	}
}

func TestParseServeInstance(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{name: "default", want: "true"},
		{name: "env", env: map[string]string{"WARREN_INSTANCE": "e2e-1"}, want: "e2e-1"},
		{name: "flag wins", env: map[string]string{"WARREN_INSTANCE": "e2e-1"}, args: []string{"--instance", "blue"}, want: "blue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return tt.env[k] }}
			cfg, err := m.parseServe(tt.args)
			if err != nil || cfg.Instance != tt.want {
				t.Errorf("parseServe(%q) with env %v: instance %q, %v; want %q", tt.args, tt.env, cfg.Instance, err, tt.want)
			}
		})
	}
	if _, _, err := run(t, nil, "serve", "--instance="); !errors.As(err, new(usageError)) {
		t.Errorf("empty --instance: %v, want usage error", err)
	}
	_, stderr, _ := run(t, nil, "serve", "-h")
	if !strings.Contains(stderr, "-instance") || !strings.Contains(stderr, "WARREN_INSTANCE") {
		t.Errorf("serve -h does not document --instance:\n%s", stderr)
	}
}

func TestDoctorReportsEveryCheck(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent.sock") // the moby client reads the real environment
	t.Setenv("PATH", t.TempDir())                       // no iptables
	env := map[string]string{"WARREN_STATE_DIR": t.TempDir(), "WARREN_AGENT": "/nonexistent/warren-agent"}
	stdout, _, err := run(t, env, "doctor", "--addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "4 of 11 checks failed") {
		t.Errorf("doctor without Docker, iptables or an agent: %v, want 4 of 11 checks failed", err)
	}
	for _, want := range []string{"FAIL  docker engine", "FAIL  base image", "WARN  code interpreter", "WARN  MCP gateway", "WARN  desktop",
		"FAIL  firewall         firewall: iptables not found", "--firewall=off",
		"FAIL  agent binary", "ok    listen address", "ok    state directory",
		"ok    runtime          runc", "WARN  checkpoints"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, stdout)
		}
	}

	stdout, _, _ = run(t, env, "doctor", "--addr", "127.0.0.1:0", "--firewall=off")
	if !strings.Contains(stdout, "ok    firewall         off: ") {
		t.Errorf("doctor --firewall=off:\n%s", stdout)
	}
	if _, _, err := run(t, env, "doctor", "--firewall=nft"); !errors.As(err, new(usageError)) {
		t.Errorf("doctor --firewall=nft: %v, want usage error", err)
	}
	if _, _, err := run(t, env, "doctor", "--runtime=kata"); !errors.As(err, new(usageError)) {
		t.Errorf("doctor --runtime=kata: %v, want usage error", err)
	}
	stdout, _, _ = run(t, env, "doctor", "--addr", "127.0.0.1:0", "--runtime=gvisor")
	if !strings.Contains(stdout, "FAIL  runtime          cannot check without the docker engine") {
		t.Errorf("doctor --runtime=gvisor without Docker:\n%s", stdout)
	}
}

// TestDoctorCodeInterpreterImage: a missing code interpreter image is a
// warning that says what to run, not a failure.
func TestDoctorCodeInterpreterImage(t *testing.T) {
	if err := exec.Command("docker", "version").Run(); err != nil {
		t.Skipf("skipping: no usable Docker engine: %v", err)
	}
	env := map[string]string{"WARREN_STATE_DIR": t.TempDir(), "WARREN_AGENT": "/nonexistent/warren-agent"}
	stdout, _, _ := run(t, env, "doctor", "--addr", "127.0.0.1:0", "--firewall=off", "--code-interpreter-image", "warren/doctor-test-missing",
		"--mcp-gateway-image", "warren/doctor-test-missing-mcp")
	for _, want := range []string{
		"WARN  code interpreter warren/doctor-test-missing is missing: only the code-interpreter-v1 template needs it; " +
			"build it with: warren image build code-interpreter --tag warren/doctor-test-missing\n",
		"WARN  MCP gateway      warren/doctor-test-missing-mcp is missing: only the mcp-gateway template (Sandbox.create({ mcp })) needs it; " +
			"build it with: warren image build mcp-gateway --tag warren/doctor-test-missing-mcp\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestGVisorResolvConf(t *testing.T) {
	dir := t.TempDir()
	upstream, err := parseEgressDNS("10.9.9.9:53, 127.0.0.1:53, 10.8.8.8:5353")
	if err != nil {
		t.Fatal(err)
	}
	path, err := gvisorResolvConf(dir, upstream, slog.New(slog.DiscardHandler))
	if err != nil || path == "" {
		t.Fatalf("gvisorResolvConf = %q, %v", path, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if !strings.Contains(got, "nameserver 10.9.9.9\n") || strings.Contains(got, "127.0.0.1") || strings.Contains(got, "10.8.8.8") {
		t.Errorf("resolv.conf: loopback and non-53 resolvers must be left out, reachable ones kept:\n%s", got)
	}
	if _, err := parseEgressDNS("not-an-address"); err == nil {
		t.Error("a bad --egress-dns was accepted")
	}
}

// The maxima default to the machine's CPUs and half its memory, and come
// from flags or WARREN_MAX_* like every setting.
func TestParseServeMaxima(t *testing.T) {
	env := map[string]string{"WARREN_MAX_MEMORY_MB": "2048"}
	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return env[k] }}
	cfg, err := m.parseServe([]string{"--max-cpu-count=3"})
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Lifecycle; l.MaxCPUCount != 3 || l.MaxMemoryMB != 2048 {
		t.Errorf("maxima = %d CPUs, %d MiB; want 3, 2048", l.MaxCPUCount, l.MaxMemoryMB)
	}
	env = nil
	cfg, err = m.parseServe(nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Lifecycle; l.MaxCPUCount != runtime.NumCPU() || l.MaxMemoryMB != lifecycle.DefaultMaxMemoryMB(0) || l.MaxMemoryMB < 128 || l.MaxMemoryMB%128 != 0 {
		t.Errorf("default maxima = %d CPUs, %d MiB; want %d and half the machine's memory", l.MaxCPUCount, l.MaxMemoryMB, runtime.NumCPU())
	}
}

// parseServe reports a lifecycle setting it refuses as the flag of the
// setting's name: every setting is a flag but those serve leaves at their
// defaults.
func TestServeFlagsNameSettings(t *testing.T) {
	_, help, _ := run(t, nil, "serve", "-h")
	notFlags := map[string]bool{"envd-version": true, "default-user": true, "tick-interval": true}
	typ := reflect.TypeFor[lifecycle.Settings]()
	for i := range typ.NumField() {
		s := lifecycle.DefaultSettings()
		reflect.ValueOf(&s).Elem().Field(i).SetZero()
		var se *lifecycle.SettingError
		if !errors.As(s.Validate(), &se) {
			continue // a zero it takes
		}
		if has := strings.Contains(help, "\n  -"+se.Name+" "); has == notFlags[se.Name] {
			t.Errorf("setting %s (%s): serve flag --%s %v, want %v", se.Name, typ.Field(i).Name, se.Name, has, !notFlags[se.Name])
		}
	}
}

// A limit of 0 would silently become the default: it is refused, saying
// what to give instead; negative values mean never where there is a never.
func TestParseServeLimits(t *testing.T) {
	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	for _, tt := range []struct {
		args []string
		want string // "" = accepted
	}{
		{[]string{"--max-frozen=0"}, "--max-frozen must not be 0: give a positive value, or a negative one for never"},
		{[]string{"--freeze-max-age=0s"}, "--freeze-max-age must not be 0"},
		{[]string{"--ready-timeout=0s"}, "--ready-timeout must be positive"},
		{[]string{"--memory-mb=-1"}, "--memory-mb must be positive"},
		{[]string{"--metrics-history=0"}, "--metrics-history must be positive"},
		{[]string{"--max-cpu-count=0"}, "--max-cpu-count must be positive"},
		{[]string{"--max-memory-mb=-5"}, "--max-memory-mb must be positive"},
		{[]string{"--max-frozen=-1", "--freeze-max-age=-1s", "--pids-limit=-1", "--ready-timeout=5s"}, ""},
	} {
		cfg, err := m.parseServe(tt.args)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v", tt.args, err)
		case tt.want == "" && cfg.Lifecycle.ReadyTimeout != 5*time.Second:
			t.Errorf("%q: ready timeout %v", tt.args, cfg.Lifecycle.ReadyTimeout)
		case tt.want != "" && (!errors.As(err, new(usageError)) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%q: err %v, want a usage error with %q", tt.args, err, tt.want)
		}
	}
}
