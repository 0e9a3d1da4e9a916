package codeinterp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestPythonInterruptOnDisconnect(t *testing.T) {
	t.Parallel()
	requireIPyKernel(t)
	c := realServer(t, Config{})
	c.execute(map[string]any{"code": "x = 41"})
	c.abandon(map[string]any{"code": "import time\nwhile True: time.sleep(0.1)"}, 700*time.Millisecond)
	start := time.Now()
	e := c.execute(map[string]any{"code": "x + 1"})
	if e.text() != "42" {
		t.Fatalf("after an abandoned execution got %q (error %+v); want 42 from the same, interrupted kernel", e.text(), e.err)
	}
	t.Logf("next execution after disconnect took %v", time.Since(start))
}

func TestPythonKernelDeath(t *testing.T) {
	t.Parallel()
	requireIPyKernel(t)
	c := realServer(t, Config{})
	c.execute(map[string]any{"code": "x = 1"})
	e := c.execute(map[string]any{"code": "import os; os._exit(3)"})
	if e.err == nil || e.err.Name != errContextRestarting {
		t.Fatalf("kernel exit reported as %+v, want %s", e.err, errContextRestarting)
	}
	e = c.execute(map[string]any{"code": "'x' in globals()"})
	if e.text() != "False" || e.err != nil {
		t.Fatalf("after restart: text %q error %+v; want a fresh kernel", e.text(), e.err)
	}
}

func TestPythonContexts(t *testing.T) {
	t.Parallel()
	requireIPyKernel(t)
	c := realServer(t, Config{})
	dir := t.TempDir()
	resp, raw := c.do("POST", "/contexts", map[string]any{"language": "python", "cwd": dir})
	var ctx struct{ ID, Language, Cwd string }
	if resp.StatusCode != 200 || json.Unmarshal(raw, &ctx) != nil || ctx.Language != "python" || ctx.Cwd != dir {
		t.Fatalf("create: %s %s", resp.Status, raw)
	}
	if e := c.execute(map[string]any{"code": "import os; os.getcwd()", "context_id": ctx.ID}); e.text() != dir {
		t.Fatalf("cwd = %q, want %q", e.text(), dir)
	}
	c.execute(map[string]any{"code": "y = 5", "context_id": ctx.ID})
	if e := c.execute(map[string]any{"code": "y"}); e.err == nil || e.err.Value != "name 'y' is not defined" {
		t.Fatalf("default context sees another context's state: %+v %q", e.err, e.text())
	}
	_, raw = c.do("GET", "/contexts", nil)
	var list []struct{ ID string }
	json.Unmarshal(raw, &list)
	if len(list) != 2 {
		t.Fatalf("list = %s, want the default and the created context", raw)
	}
	if resp, raw := c.do("POST", "/contexts/"+ctx.ID+"/restart", nil); resp.StatusCode != 200 || string(raw) != "null" {
		t.Fatalf("restart: %s %s", resp.Status, raw)
	}
	if e := c.execute(map[string]any{"code": "'y' in globals()", "context_id": ctx.ID}); e.text() != "False" {
		t.Fatalf("state survived a restart: %q", e.text())
	}
	if resp, _ := c.do("DELETE", "/contexts/"+ctx.ID, nil); resp.StatusCode != 200 {
		t.Fatalf("delete: %s", resp.Status)
	}
	resp, raw = c.do("POST", "/execute", map[string]any{"code": "1", "context_id": ctx.ID})
	if resp.StatusCode != 404 || string(raw) != "Context "+ctx.ID+" not found" {
		t.Fatalf("execute on deleted context: %s %q", resp.Status, raw)
	}
}

func TestSandboxEnvVarsFromAgent(t *testing.T) {
	t.Parallel()
	requireIPyKernel(t)
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/envs" || r.Header.Get("X-Access-Token") != "secret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"SANDBOX_VAR":"from-agent","bad name":"x"}`))
	}))
	defer agent.Close()
	c := realServer(t, Config{AgentURL: agent.URL})
	get := map[string]any{"code": "import os; print(os.environ.get('SANDBOX_VAR'), end='')"}
	if e := c.execute(get, "X-Access-Token", "secret"); e.stdout != "from-agent" {
		t.Fatalf("sandbox env var: %q (error %+v)", e.stdout, e.err)
	}
	over := map[string]any{"code": get["code"], "env_vars": map[string]string{"SANDBOX_VAR": "override"}}
	if e := c.execute(over); e.stdout != "override" {
		t.Fatalf("override: %q", e.stdout)
	}
	if e := c.execute(get); e.stdout != "from-agent" {
		t.Fatalf("after override: %q, want the sandbox value back", e.stdout)
	}
}
