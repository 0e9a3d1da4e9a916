package mcpgateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func twoServers(t *testing.T) (Options, string) {
	t.Helper()
	base := gitBase(t, map[string]map[string]string{
		"acme/alpha": {"README": "alpha"},
		"acme/beta":  {"README": "beta"},
	})
	cfg := map[string]any{
		"github/acme/alpha": map[string]any{
			"installCmd": "echo built > built.txt",
			// The server starts in its clone, after installCmd.
			"runCmd": "test -f built.txt && " + fakeRunCmd(t, "alpha"),
			"envs":   map[string]string{"ALPHA_SECRET": "s3cret"},
		},
		"github/acme/beta": map[string]any{"runCmd": fakeRunCmd(t, "beta")},
	}
	b, _ := json.Marshal(cfg)
	return Options{GitBase: base, Dir: t.TempDir()}, string(b)
}

func TestGatewayAggregatesAndRoutes(t *testing.T) {
	opts, cfg := twoServers(t)
	_, hs := startGateway(t, opts, cfg, "tok")
	s := connect(t, hs.URL, "tok")
	ctx := t.Context()

	var names []string
	for tool, err := range s.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if tool.Description == "" {
			t.Errorf("tool %s lost its description", tool.Name)
		}
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"alpha__echo", "alpha__env", "alpha__exit", "beta__echo", "beta__env", "beta__exit"}, names); diff != "" {
		t.Errorf("tools/list (-want +got):\n%s", diff)
	}

	calls := []struct{ tool, args, want string }{
		{"alpha__echo", `{"text":"hi"}`, "alpha: hi"},
		{"beta__echo", `{"text":"hi"}`, "beta: hi"},
		{"alpha__env", `{"name":"ALPHA_SECRET"}`, "s3cret"},
		{"beta__env", `{"name":"ALPHA_SECRET"}`, ""},
	}
	for _, c := range calls {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})
		if err != nil {
			t.Fatalf("call %s: %v", c.tool, err)
		}
		if got := text(t, res.Content); got != c.want || res.IsError {
			t.Errorf("call %s = %q (isError %v), want %q", c.tool, got, res.IsError, c.want)
		}
	}
	if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); err == nil {
		t.Error("an unprefixed tool name was accepted")
	}

	p, err := s.GetPrompt(ctx, &mcp.GetPromptParams{Name: "beta__greet", Arguments: map[string]string{"who": "you"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, []mcp.Content{p.Messages[0].Content}); got != "beta greets you" {
		t.Errorf("prompt = %q", got)
	}
	r, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fake://alpha/readme"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Contents[0].Text != "readme of alpha" {
		t.Errorf("resource = %q", r.Contents[0].Text)
	}
}

// A server that exits keeps its tools listed; calling one is a tool error
// saying it exited and what it last wrote to stderr, and the other server
// still answers.
func TestGatewayServerExits(t *testing.T) {
	opts, cfg := twoServers(t)
	_, hs := startGateway(t, opts, cfg, "tok")
	s := connect(t, hs.URL, "tok")
	ctx := t.Context()
	if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__exit", Arguments: map[string]any{}}); err == nil {
		t.Fatal("the call that ended its server succeeded")
	}
	var res *mcp.CallToolResult
	for range 100 { // the gateway learns of the exit from the closed pipe
		var err error
		if res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": "x"}}); err == nil && res.IsError {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res == nil {
		t.Fatal("every call to alpha__echo after the exit failed instead of answering a tool error")
	}
	if got := text(t, res.Content); !res.IsError || !strings.Contains(got, `MCP server "github/acme/alpha" has exited`) || !strings.Contains(got, "alpha says goodbye") {
		t.Errorf("call after exit = %q (isError %v)", got, res.IsError)
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "beta__echo", Arguments: map[string]any{"text": "still"}})
	if err != nil || text(t, res.Content) != "beta: still" {
		t.Errorf("beta after alpha exited: %v, %v", res, err)
	}
}

func TestGatewayRequiresToken(t *testing.T) {
	opts, cfg := twoServers(t)
	_, hs := startGateway(t, opts, cfg, "right-token")
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	for _, tt := range []struct {
		name, auth string
		want       int
	}{
		{"none", "", http.StatusUnauthorized},
		{"wrong", "Bearer wrong-token", http.StatusUnauthorized},
		{"not bearer", "Basic right-token", http.StatusUnauthorized},
		{"right", "Bearer right-token", http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", hs.URL+Path, strings.NewReader(init))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tt.want {
				t.Errorf("status %d, want %d", res.StatusCode, tt.want)
			}
			if tt.want == http.StatusOK && res.Header.Get("Mcp-Session-Id") == "" {
				t.Error("initialize answered without an Mcp-Session-Id")
			}
			if tt.want == http.StatusUnauthorized && !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q", res.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

func TestGatewayStartFailures(t *testing.T) {
	base := gitBase(t, map[string]map[string]string{"acme/app": {"README": "x"}})
	for _, tt := range []struct {
		name, config string
		want         []string
	}{
		{"server exits", `{"github/acme/app":{"runCmd":"echo no such thing >&2; exit 3"}}`,
			[]string{`MCP server "github/acme/app" did not start`, "no such thing"}},
		{"install fails", `{"github/acme/app":{"installCmd":"echo cannot build >&2; false","runCmd":"true"}}`,
			[]string{`MCP server "github/acme/app": installCmd`, "cannot build"}},
		{"no repository", `{"github/acme/missing":{"runCmd":"true"}}`,
			[]string{`MCP server "github/acme/missing": git clone ` + base + "/acme/missing"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			servers, err := ParseConfig([]byte(tt.config))
			if err != nil {
				t.Fatal(err)
			}
			g := New(Options{GitBase: base, Dir: t.TempDir()}, nil)
			err = g.Start(t.Context(), servers)
			if err == nil {
				g.Close()
				t.Fatal("Start succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// A catalog server runs its installed package's bin with the arguments
// and environment its parameters map to; an uninstalled one is installed
// first (not tested here: that needs the registry).
func TestGatewayCatalogServer(t *testing.T) {
	dir := t.TempDir()
	e := catalog["filesystem"]
	pkg := filepath.Join(dir, "npm", "filesystem", "node_modules", e.Package)
	bin := filepath.Join(dir, "npm", "filesystem", "node_modules", ".bin")
	for _, d := range []string{pkg, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"bin":{"mcp-server-filesystem":"dist/index.js"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The "package" records its arguments, then is the fake server.
	script := fmt.Sprintf("#!/bin/sh\nexport FAKE_ARGS=\"$*\"\n%s\n", fakeRunCmd(t, "fs"))
	if err := os.WriteFile(filepath.Join(bin, "mcp-server-filesystem"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, hs := startGateway(t, Options{Dir: dir}, `{"filesystem":{"paths":["/a","/b c"]}}`, "t")
	s := connect(t, hs.URL, "t")
	res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "filesystem__env", Arguments: map[string]any{"name": "FAKE_ARGS"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res.Content); got != "/a /b c" {
		t.Errorf("the server got arguments %q, want %q", got, "/a /b c")
	}
}

func TestToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "etc", "mcp-gateway", ".token")
	got, err := Token(" given ", file)
	if err != nil || got != "given" {
		t.Fatalf("Token(given) = %q, %v", got, err)
	}
	gen, err := Token("", file)
	if err != nil || len(gen) != 64 {
		t.Fatalf("Token(\"\") = %q, %v; want 64 hex digits", gen, err)
	}
	b, err := os.ReadFile(file)
	if err != nil || string(b) != gen {
		t.Errorf("token file holds %q, %v; want %q", b, err, gen)
	}
	st, _ := os.Stat(file)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", st.Mode().Perm())
	}
}

// Pull (addMcpServer's `mcp-gateway pull NAME...`) clones github entries
// ahead of time, so a start needs no git source; unknown names fail.
func TestPull(t *testing.T) {
	base := gitBase(t, map[string]map[string]string{"acme/alpha": {"README": "x"}})
	opts := Options{GitBase: base, Dir: t.TempDir()}
	for _, tt := range []struct {
		names   []string
		wantErr string
	}{
		{nil, "pull needs the names"},
		{[]string{"nosuch"}, `unknown MCP server "nosuch": this gateway's catalog has brave,`},
		{[]string{"github/acme"}, "github/<owner>/<repo>"},
		{[]string{"github/acme/missing"}, "git clone"},
	} {
		if err := Pull(t.Context(), opts, tt.names); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Pull(%q) = %v, want an error containing %q", tt.names, err, tt.wantErr)
		}
	}
	if err := Pull(t.Context(), opts, []string{"github/acme/alpha"}); err != nil {
		t.Fatal(err)
	}
	opts.GitBase = filepath.Join(t.TempDir(), "gone")
	cfg := fmt.Sprintf(`{"github/acme/alpha":{"runCmd":%q}}`, "test -f README && "+fakeRunCmd(t, "alpha"))
	_, hs := startGateway(t, opts, cfg, "t")
	res, err := connect(t, hs.URL, "t").CallTool(t.Context(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": "pulled"}})
	if err != nil || text(t, res.Content) != "alpha: pulled" {
		t.Errorf("the pulled server: %v, %v", res, err)
	}
}
