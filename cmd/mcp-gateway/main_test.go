package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Environment that makes the test binary something else: the gateway
// itself (the daemon the background start execs is os.Executable()), or
// a stdio MCP server with one tool, ping.
const (
	asMainEnv   = "MCP_GATEWAY_TEST_AS_MAIN"
	asServerEnv = "MCP_GATEWAY_TEST_AS_SERVER"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(asServerEnv) != "":
		s := mcp.NewServer(&mcp.Implementation{Name: "pinger", Version: "0"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "ping"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
		})
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	case os.Getenv(asMainEnv) != "":
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// repoBase makes <base>/acme/pinger, a git repository with one commit.
func repoBase(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	base := t.TempDir()
	dir := filepath.Join(base, "acme", "pinger")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "--quiet"}, {"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "--quiet", "--allow-empty", "-m", "init"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return base
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// The SDK's `mcp-gateway --config '<json>'` returns once the gateway
// serves, leaving it running in the background with the token it was
// given in the token file.
func TestBackgroundStart(t *testing.T) {
	dir := t.TempDir()
	exe, _ := os.Executable()
	t.Setenv(asMainEnv, "1")
	t.Setenv("MCP_GATEWAY_GIT_BASE", repoBase(t))
	t.Setenv("MCP_GATEWAY_DIR", filepath.Join(dir, "servers"))
	t.Setenv(tokenEnv, "the-token")
	port := freePort(t)
	tokenFile := filepath.Join(dir, "etc", ".token")
	config := fmt.Sprintf(`{"github/acme/pinger":{"runCmd":"%s=1 exec %s"}}`, asServerEnv, exe)
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &out, Getenv: os.Getenv}
	err := m.Run(t.Context(), []string{"--config", config, "--addr", "127.0.0.1:" + strconv.Itoa(port),
		"--token-file", tokenFile, "--log", filepath.Join(dir, "gateway.log")})
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out.String())
	}
	match := regexp.MustCompile(`^MCP gateway \(pid (\d+)\) ready: 1 server\(s\), 1 tool\(s\)`).FindStringSubmatch(out.String())
	if match == nil {
		t.Fatalf("output %q", out.String())
	}
	pid, _ := strconv.Atoi(match[1])
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGTERM) })

	if b, err := os.ReadFile(tokenFile); err != nil || string(b) != "the-token" {
		t.Errorf("token file holds %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "etc", "config.json")); err != nil || string(b) != config {
		t.Errorf("config file holds %q, %v", b, err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), HTTPClient: &http.Client{Transport: bearer("the-token")}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "pinger__ping", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "pong" {
		t.Errorf("ping = %q", got)
	}

	// A second start finds the port taken and says so.
	out.Reset()
	err = m.Run(t.Context(), []string{"--config", config, "--addr", "127.0.0.1:" + strconv.Itoa(port),
		"--token-file", tokenFile, "--log", filepath.Join(dir, "gateway.log")})
	if err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second start: %v", err)
	}
}

// A server that does not come up fails the start with its stderr, and
// leaves nothing listening.
func TestBackgroundStartFails(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(asMainEnv, "1")
	t.Setenv("MCP_GATEWAY_GIT_BASE", repoBase(t))
	t.Setenv("MCP_GATEWAY_DIR", filepath.Join(dir, "servers"))
	port := freePort(t)
	m := &Main{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: os.Getenv}
	err := m.Run(t.Context(), []string{"--config", `{"github/acme/pinger":{"runCmd":"echo missing dependency >&2; exit 1"}}`,
		"--addr", "127.0.0.1:" + strconv.Itoa(port), "--token-file", filepath.Join(dir, ".token"), "--log", filepath.Join(dir, "log")})
	if err == nil || !strings.Contains(err.Error(), `"github/acme/pinger" did not start`) || !strings.Contains(err.Error(), "missing dependency") {
		t.Fatalf("start error = %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
		c.Close()
		t.Error("something still listens on the gateway's port")
	}
	// A bad config fails before anything starts.
	err = m.Run(t.Context(), []string{"--config", `{"nosuch":{}}`, "--token-file", filepath.Join(dir, ".token")})
	if err == nil || !strings.Contains(err.Error(), `unknown MCP server "nosuch"`) {
		t.Errorf("bad config: %v", err)
	}
}
