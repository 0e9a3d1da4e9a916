package codeinterp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func requireIRkernel(t *testing.T) {
	t.Helper()
	if err := exec.Command("R", "--slave", "-e", "library(IRkernel)").Run(); err != nil {
		t.Skipf("skipping: no R with IRkernel on PATH (apt-get install r-base-core r-cran-irkernel); TestInContainer covers R in the image: %v", err)
	}
}

func TestR(t *testing.T) {
	t.Parallel()
	requireIRkernel(t)
	dir := t.TempDir()
	c := realServer(t, Config{Workdir: dir})
	checkR(t, c, dir, t.TempDir())
}

// checkR drives R through the server: the default R context, whose cwd is
// wantCwd, and a context created in otherCwd. IRkernel sends every value as
// display_data, so results are not main results and the SDK's
// execution.text stays empty, as with E2B's server; clients read
// results[0].text, R's printed form ([1] "abc").
func checkR(t *testing.T, c *client, wantCwd, otherCwd string, header ...string) {
	t.Helper()
	r := func(code string, env map[string]string) execution {
		t.Helper()
		return c.execute(map[string]any{"code": code, "language": "r", "env_vars": env}, header...)
	}
	text := func(e execution) string {
		if len(e.results) != 1 {
			t.Fatalf("results %+v (error %+v), want one", e.results, e.err)
		}
		return e.results[0].Text
	}

	start := time.Now()
	e := r(`x <- 41; print("hi"); x + 1`, nil)
	t.Logf("first R execution (kernel start) %v", time.Since(start))
	if e.stdout != "[1] \"hi\"\n" || text(e) != "[1] 42" || e.results[0].IsMainResult || e.count == 0 || e.err != nil {
		t.Fatalf("R: stdout %q results %+v count %d error %+v", e.stdout, e.results, e.count, e.err)
	}
	if e := r("x", nil); text(e) != "[1] 41" {
		t.Fatalf("state lost: %q", text(e))
	}
	if e := r("getwd()", nil); text(e) != `[1] "`+wantCwd+`"` {
		t.Fatalf("cwd: %q, want %s", text(e), wantCwd)
	}
	if e := r(`message("to stderr"); cat("no newline"); invisible(1)`, nil); !strings.HasPrefix(e.stderr, "to stderr\n") || e.stdout != "no newline" || len(e.results) != 0 {
		t.Fatalf("streams: stdout %q stderr %q results %+v", e.stdout, e.stderr, e.results)
	}
	e = r("f <- function() stop(\"boom\")\nf()", nil)
	if e.err == nil || e.err.Name != "ERROR" || !strings.Contains(e.err.Value, "boom") || !strings.Contains(e.err.Traceback, "f()") {
		t.Fatalf("error: %+v", e.err)
	}
	if e := r("undefined_name", nil); e.err == nil || !strings.Contains(e.err.Value, "object 'undefined_name' not found") {
		t.Fatalf("undefined name: %+v", e.err)
	}
	if e := r("x +", nil); e.err == nil || !strings.Contains(e.err.Value, "unexpected end of input") {
		t.Fatalf("syntax error: %+v", e.err)
	}

	// Per-execution env vars: set for one execution, then what was there
	// before (nothing, or the kernel's own value) comes back. Names need not
	// be R names; values arrive byte for byte.
	value := "b'a\"r\n\u00e9 <&> \\ $HOME `x`"
	get := `cat(Sys.getenv("FOO", unset = "unset"), Sys.getenv("_U", unset = "unset"), Sys.getenv("TRUE", unset = "unset"), sep = "|")`
	env := map[string]string{"FOO": value, "_U": "u", "TRUE": "t"}
	if e := r(get, env); e.stdout != value+"|u|t" || e.err != nil {
		t.Fatalf("with env_vars: %q (error %+v)", e.stdout, e.err)
	}
	if e := r(get, nil); e.stdout != "unset|unset|unset" {
		t.Fatalf("env vars not reverted: %q", e.stdout)
	}
	if e := r(`Sys.getenv("FOO")`, map[string]string{"FOO": "bar"}); text(e) != `[1] "bar"` {
		t.Fatalf("Sys.getenv result: %q", text(e))
	}
	r(`Sys.setenv(FOO = "mine"); k <- "user's k"; v <- "user's v"`, nil)
	r(get, map[string]string{"FOO": "tmp"})
	if e := r(`cat(Sys.getenv("FOO"), k, v, ls(), exists(".warren_env_saved"), sep = "|")`, nil); e.stdout != "mine|user's k|user's v|f|k|v|x|FALSE" {
		t.Fatalf("after env_vars over a value of the kernel's own: %q; want its value back and no other variables", e.stdout)
	}

	c.abandon(map[string]any{"code": "Sys.sleep(100)", "language": "r"}, 500*time.Millisecond)
	if e := r("x + 1", nil); e.err != nil || text(e) != "[1] 42" {
		t.Fatalf("after an interrupted cell: %+v; want the same kernel", e.err)
	}

	resp, raw := c.do("POST", "/contexts", map[string]any{"language": "R", "cwd": otherCwd}, header...)
	var ctx struct{ ID, Language, Cwd string }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &ctx) != nil || ctx.Language != "r" || ctx.Cwd != otherCwd {
		t.Fatalf("create R context: %s %s", resp.Status, raw)
	}
	in := func(code string) execution {
		return c.execute(map[string]any{"code": code, "context_id": ctx.ID}, header...)
	}
	if e := in(`cat(getwd(), exists("x"))`); e.stdout != otherCwd+" FALSE" {
		t.Fatalf("new context: %q (error %+v); want its cwd and no state of the default one", e.stdout, e.err)
	}
	if e := in("tools::pskill(Sys.getpid(), 9)"); e.err == nil || e.err.Name != errContextRestarting {
		t.Fatalf("kernel death: %+v", e.err)
	}
	if e := in("1:3"); text(e) != "[1] 1 2 3" {
		t.Fatalf("after a restart: %q %+v", text(e), e.err)
	}
}

func TestRSandboxEnvVars(t *testing.T) {
	t.Parallel()
	requireIRkernel(t)
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"SANDBOX_VAR":"from-agent"}`))
	}))
	defer agent.Close()
	c := realServer(t, Config{AgentURL: agent.URL})
	get := map[string]any{"code": `Sys.getenv("SANDBOX_VAR")`, "language": "r"}
	if e := c.execute(get); len(e.results) != 1 || e.results[0].Text != `[1] "from-agent"` {
		t.Fatalf("sandbox env var: %+v (error %+v)", e.results, e.err)
	}
	over := map[string]any{"code": get["code"], "language": "r", "env_vars": map[string]string{"SANDBOX_VAR": "override"}}
	if e := c.execute(over); len(e.results) != 1 || e.results[0].Text != `[1] "override"` {
		t.Fatalf("override: %+v", e.results)
	}
	if e := c.execute(get); len(e.results) != 1 || e.results[0].Text != `[1] "from-agent"` {
		t.Fatalf("after override: %+v, want the sandbox value back", e.results)
	}
}
