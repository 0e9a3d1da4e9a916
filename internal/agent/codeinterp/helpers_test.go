package codeinterp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// testLogger logs to the test output with -v, and is silent otherwise.
func testLogger(t *testing.T) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// client drives a server over real HTTP.
type client struct {
	t    *testing.T
	base string
}

func serve(t *testing.T, s *Server) *client {
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.Close()
		s.Close()
	})
	return &client{t: t, base: ts.URL}
}

func (c *client) do(method, path string, body any, header ...string) (*http.Response, []byte) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, raw
}

// execution is what a client makes of an /execute stream.
type execution struct {
	lines   []Output
	stdout  string
	stderr  string
	results []Output
	err     *ExecError
	count   int
}

func (e execution) text() string {
	for _, r := range e.results {
		if r.IsMainResult {
			return r.Text
		}
	}
	return ""
}

func (c *client) execute(body map[string]any, header ...string) execution {
	c.t.Helper()
	resp, raw := c.do("POST", "/execute", body, header...)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("POST /execute %v: %s %s", body, resp.Status, raw)
	}
	return parseStream(c.t, raw)
}

// abandon starts an execution and disconnects after d, as a client that
// times out does.
func (c *client) abandon(body map[string]any, d time.Duration) {
	c.t.Helper()
	raw, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", c.base+"/execute", bytes.NewReader(raw))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body) // until the client gives up
}

func parseStream(t *testing.T, raw []byte) execution {
	t.Helper()
	var e execution
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var o Output
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatalf("bad NDJSON line %q: %v", sc.Text(), err)
		}
		e.lines = append(e.lines, o)
		switch o.Type {
		case typeStdout:
			e.stdout += o.Text
		case typeStderr:
			e.stderr += o.Text
		case typeResult:
			e.results = append(e.results, o)
		case typeError:
			e.err = o.ExecError
		case typeCount:
			e.count = *o.ExecutionCount
		}
	}
	if n := len(e.lines); n == 0 || e.lines[n-1].Type != typeEndOfExecu {
		t.Fatalf("stream does not end with end_of_execution: %s", raw)
	}
	for _, o := range e.lines[:len(e.lines)-1] {
		if o.Type == typeEndOfExecu {
			t.Fatalf("end_of_execution before the end: %s", raw)
		}
	}
	return e
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }
