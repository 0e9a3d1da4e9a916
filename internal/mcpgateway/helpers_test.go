package mcpgateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeServerEnv makes the test binary a stdio MCP server named by its
// value: tools echo and env, prompt greet, resource fake://<name>/readme.
const fakeServerEnv = "MCPGATEWAY_FAKE_SERVER"

func TestMain(m *testing.M) {
	if name := os.Getenv(fakeServerEnv); name != "" {
		if err := runFakeServer(name); err != nil {
			fmt.Fprintln(os.Stderr, "fake server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runFakeServer(name string) error {
	s := mcp.NewServer(&mcp.Implementation{Name: "fake-" + name, Version: "0"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes text"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ": " + in.Text}}}, nil, nil
	})
	type envIn struct {
		Name string `json:"name"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "reads an environment variable"}, func(_ context.Context, _ *mcp.CallToolRequest, in envIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: os.Getenv(in.Name)}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "exit", Description: "ends the server"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		fmt.Fprintln(os.Stderr, name+" says goodbye")
		os.Exit(3)
		return nil, nil, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: name + " greets " + req.Params.Arguments["who"]}}}}, nil
	})
	uri := "fake://" + name + "/readme"
	s.AddResource(&mcp.Resource{URI: uri, Name: "readme", MIMEType: "text/plain"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: "readme of " + name}}}, nil
	})
	return s.Run(context.Background(), &mcp.StdioTransport{})
}

// fakeRunCmd is a runCmd starting the fake server called name.
func fakeRunCmd(t *testing.T, name string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s=%s exec %s", fakeServerEnv, name, exe)
}

// gitBase makes a directory of git repositories <base>/<owner>/<repo>,
// each with one commit holding files, for github entries to clone.
func gitBase(t *testing.T, repos map[string]map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	base := t.TempDir()
	for repo, files := range repos {
		dir := filepath.Join(base, repo)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, args := range [][]string{
			{"init", "--quiet"},
			{"add", "."},
			{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "--quiet", "--allow-empty", "-m", "init"},
		} {
			if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v: %s", args, err, out)
			}
		}
	}
	return base
}

// startGateway starts a gateway on config and serves it over HTTP with
// token; both stop when the test ends.
func startGateway(t *testing.T, opts Options, config, token string) (*Gateway, *httptest.Server) {
	t.Helper()
	servers, err := ParseConfig([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g := New(opts, log)
	if err := g.Start(t.Context(), servers); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	hs := httptest.NewServer(g.Handler(token, log))
	t.Cleanup(hs.Close)
	return g, hs
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connect opens an MCP client session to the gateway at url.
func connect(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:   url + Path,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// text is the text of a result's content.
func text(t *testing.T, content []mcp.Content) string {
	t.Helper()
	var b strings.Builder
	for _, c := range content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("content %T, want text", c)
		}
		b.WriteString(tc.Text)
	}
	return b.String()
}
