package codeinterp

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestExecuteRouting(t *testing.T) {
	c, kernels := fakeServer(t, Config{})
	_, raw := c.do("POST", "/contexts", map[string]any{"language": "bash"})
	var bash struct{ ID string }
	json.Unmarshal(raw, &bash)
	tests := []struct {
		name     string
		body     map[string]any
		status   int
		wantText string // text of the main result, or the response body when status != 200
	}{
		{"default is python", map[string]any{"code": "a"}, 200, "python:a"},
		{"language", map[string]any{"code": "b", "language": " JS "}, 200, "javascript:b"},
		{"ts alias", map[string]any{"code": "c", "language": "ts"}, 200, "typescript:c"},
		{"context", map[string]any{"code": "d", "context_id": bash.ID}, 200, "bash:d"},
		{"null fields", map[string]any{"code": "e", "context_id": nil, "language": nil, "env_vars": nil}, 200, "python:e"},
		{"both", map[string]any{"code": "f", "context_id": bash.ID, "language": "python"}, 400, ""},
		{"unknown context", map[string]any{"code": "g", "context_id": "nope"}, 404, "Context nope not found"},
		{"unknown language", map[string]any{"code": "h", "language": "cobol"}, 500, `unsupported language "cobol"`},
		{"bad env name", map[string]any{"code": "i", "env_vars": map[string]string{"A=B": "c"}}, 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, raw := c.do("POST", "/execute", tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.status, raw)
			}
			if tt.status != 200 {
				if tt.wantText != "" && string(raw) != tt.wantText {
					t.Fatalf("body %q, want %q", raw, tt.wantText)
				}
				return
			}
			if got := parseStream(t, raw).text(); got != tt.wantText {
				t.Fatalf("result %q, want %q", got, tt.wantText)
			}
		})
	}
	if n := kernels.count(); n != 4 {
		t.Errorf("%d kernels started, want one per context (bash, python, javascript, typescript)", n)
	}
}

func TestExecuteStreamShape(t *testing.T) {
	c, _ := fakeServer(t, Config{})
	resp, raw := c.do("POST", "/execute", map[string]any{"code": "x"})
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type %q", ct)
	}
	want := `{"type":"stdout","text":"out:x"}
{"type":"result","text":"python:x","is_main_result":true}
{"type":"end_of_execution"}
`
	if diff := cmp.Diff(want, string(raw)); diff != "" {
		t.Errorf("stream (-want +got):\n%s", diff)
	}
}

func TestEnvVarsSetAndReverted(t *testing.T) {
	c, kernels := fakeServer(t, Config{})
	c.execute(map[string]any{"code": "x", "env_vars": map[string]string{"B": "2", "A": "1"}})
	got := kernels.last().history()
	want := []string{
		"silent:" + envOverrideCode(langPython, map[string]string{"A": "1", "B": "2"}),
		"x",
		"silent:" + envRestoreCode(langPython, map[string]string{"A": "1", "B": "2"}),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("executions (-want +got):\n%s", diff)
	}
}

func TestExecutionsSerializedPerContext(t *testing.T) {
	c, kernels := fakeServer(t, Config{})
	c.execute(map[string]any{"code": "warm"})
	k := kernels.last()
	var wg sync.WaitGroup
	wg.Go(func() { c.execute(map[string]any{"code": "block"}) })
	for len(k.history()) < 2 {
		time.Sleep(time.Millisecond)
	}
	for i := range 3 {
		wg.Go(func() { c.execute(map[string]any{"code": "q" + string(rune('0'+i))}) })
	}
	time.Sleep(50 * time.Millisecond) // the queued ones must wait
	if n := len(k.history()); n != 2 {
		t.Fatalf("%d executions started while one was running", n-2)
	}
	close(k.release)
	wg.Wait()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.maxConc != 1 || len(k.ran) != 5 {
		t.Fatalf("max concurrency %d, ran %v", k.maxConc, k.ran)
	}
}

func TestDisconnectInterrupts(t *testing.T) {
	c, kernels := fakeServer(t, Config{InterruptGrace: 100 * time.Millisecond})
	c.execute(map[string]any{"code": "warm"})
	k := kernels.last()
	for _, code := range []string{"block", "ignore-interrupt"} {
		c.abandon(map[string]any{"code": code}, 100*time.Millisecond)
		if e := c.execute(map[string]any{"code": "next"}); e.text() != "python:next" {
			t.Fatalf("after abandoning %q: %q %+v", code, e.text(), e.err)
		}
	}
	k.mu.Lock()
	interrupts := k.interrup
	k.mu.Unlock()
	if interrupts != 2 {
		t.Errorf("kernel interrupted %d times, want 2", interrupts)
	}
	if n := kernels.count(); n != 2 {
		t.Errorf("%d kernels started; the one that ignored the interrupt must be replaced, once", n)
	}
}

func TestKernelDeathAndRestart(t *testing.T) {
	c, kernels := fakeServer(t, Config{})
	e := c.execute(map[string]any{"code": "die"})
	if e.err == nil || e.err.Name != errContextRestarting {
		t.Fatalf("error %+v", e.err)
	}
	if e := c.execute(map[string]any{"code": "after"}); e.text() != "python:after" {
		t.Fatalf("after death: %q %+v", e.text(), e.err)
	}
	if n := kernels.count(); n != 2 {
		t.Errorf("%d kernels started, want 2", n)
	}
}

func TestContextCreateFailure(t *testing.T) {
	c, kernels := fakeServer(t, Config{})
	kernels.fail = errors.New("no python here")
	resp, raw := c.do("POST", "/contexts", map[string]any{"language": "python"})
	if resp.StatusCode != 500 || !strings.Contains(string(raw), "no python here") {
		t.Fatalf("%s %s", resp.Status, raw)
	}
	resp, raw = c.do("POST", "/contexts", map[string]any{"cwd": "/does/not/exist"})
	if resp.StatusCode != 400 {
		t.Fatalf("missing cwd: %s %s", resp.Status, raw)
	}
	if resp, _ := c.do("POST", "/contexts/nope/restart", nil); resp.StatusCode != 404 {
		t.Fatalf("restart unknown: %s", resp.Status)
	}
	if resp, _ := c.do("DELETE", "/contexts/nope", nil); resp.StatusCode != 404 {
		t.Fatalf("delete unknown: %s", resp.Status)
	}
}

func TestTrafficToken(t *testing.T) {
	c, _ := fakeServer(t, Config{TrafficToken: "tt"})
	tests := []struct {
		name, method, path, token string
		status                    int
	}{
		{"health is open", "GET", "/health", "", 200},
		{"missing", "GET", "/contexts", "", 403},
		{"wrong", "GET", "/contexts", "nope", 403},
		{"right", "GET", "/contexts", "tt", 200},
		{"execute without", "POST", "/execute", "", 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h []string
			if tt.token != "" {
				h = []string{headerTrafficToken, tt.token}
			}
			resp, raw := c.do(tt.method, tt.path, map[string]any{"code": "1"}, h...)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.status, raw)
			}
		})
	}
	if _, raw := c.do("GET", "/health", nil); string(raw) != `"OK"` {
		t.Errorf("health body %q", raw)
	}
}

// GET /contexts lists contexts in the order they were made: E2B's clients
// (and its tests) take the last one as the one just created.
func TestListContextsInCreationOrder(t *testing.T) {
	c, _ := fakeServer(t, Config{})
	c.execute(map[string]any{"code": "a"}) // registers the default python context first
	var made []string
	for range 8 {
		_, raw := c.do("POST", "/contexts", map[string]any{"language": "python"})
		var ctx struct{ ID string }
		if err := json.Unmarshal(raw, &ctx); err != nil || ctx.ID == "" {
			t.Fatalf("create: %s", raw)
		}
		made = append(made, ctx.ID)
	}
	_, raw := c.do("GET", "/contexts", nil)
	var list []struct{ ID string }
	if err := json.Unmarshal(raw, &list); err != nil || len(list) != len(made)+1 {
		t.Fatalf("list = %s", raw)
	}
	var got []string
	for _, ctx := range list[1:] {
		got = append(got, ctx.ID)
	}
	if diff := cmp.Diff(made, got); diff != "" {
		t.Errorf("contexts after the default one, in list order (-made +listed):\n%s", diff)
	}
}
