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

func requireJDK(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"java", "javac"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: no %s on PATH (apt-get install openjdk-17-jdk-headless); TestInContainer covers Java in the image", tool)
		}
	}
}

func TestJava(t *testing.T) {
	t.Parallel()
	requireJDK(t)
	dir := t.TempDir()
	c := realServer(t, Config{Workdir: dir})
	checkJava(t, c, dir, t.TempDir())
}

// checkJava drives Java through the server: the default Java context,
// whose cwd is wantCwd, and a context created in otherCwd. The value of a
// final expression is the main result, strings as their text, as E2B's
// clients read them (results[0].text).
func checkJava(t *testing.T, c *client, wantCwd, otherCwd string, header ...string) {
	t.Helper()
	java := func(code string, env map[string]string) execution {
		t.Helper()
		return c.execute(map[string]any{"code": code, "language": "java", "env_vars": env}, header...)
	}

	start := time.Now()
	e := java("int x = 1 + 1; x", nil)
	t.Logf("first Java execution (kernel start) %v", time.Since(start))
	if e.text() != "2" || e.count != 1 || e.err != nil || len(e.results) != 1 {
		t.Fatalf("int x = 1 + 1; x: results %+v count %d error %+v", e.results, e.count, e.err)
	}
	start = time.Now()
	if e := java("x * 21", nil); e.text() != "42" {
		t.Fatalf("state lost: %q %+v", e.text(), e.err)
	}
	t.Logf("next Java execution %v", time.Since(start))
	// Methods, classes and imports persist; the jshell tool's default
	// imports (java.util.*) are there.
	java("import java.time.Duration;\nint twice(int n) { return 2 * n; }\nrecord P(int v) {}", nil)
	if e := java("List<Integer> l = new ArrayList<>(List.of(twice(new P(3).v()), (int) Duration.ofSeconds(7).toSeconds())); l", nil); e.text() != "[6, 7]" {
		t.Fatalf("methods, classes and imports: %q %+v", e.text(), e.err)
	}
	if e := java(`String s = "héllo"; s`, nil); e.text() != "héllo" {
		t.Fatalf("string result: %q, want the text unquoted", e.text())
	}
	if e := java("x = 5;", nil); len(e.results) != 0 || e.err != nil {
		t.Fatalf("a statement has no result: %+v %+v", e.results, e.err)
	}
	if e := java(`System.out.println("Hello, World!")`, nil); len(e.results) != 0 || len(e.lines) < 2 || e.lines[1].Text != "Hello, World!" || e.stdout != "Hello, World!\n" {
		t.Fatalf("println: %+v; want the text, then its newline, as E2B's kernel sends them", e.lines)
	}
	if e := java(`System.err.print("to stderr"); System.out.print("no newline"); System.getProperty("user.dir")`, nil); e.stderr != "to stderr" || e.stdout != "no newline" || e.text() != wantCwd {
		t.Fatalf("streams and cwd: stdout %q stderr %q result %q, want cwd %s", e.stdout, e.stderr, e.text(), wantCwd)
	}

	e = java("int div(int a) { return 10 / a; }\ndiv(0)", nil)
	if e.err == nil || e.err.Name != "java.lang.ArithmeticException" || e.err.Value != "/ by zero" ||
		!strings.HasPrefix(e.err.Traceback, "java.lang.ArithmeticException: / by zero\n\tat div(#") {
		t.Fatalf("exception: %+v", e.err)
	}
	e = java(`throw new IllegalStateException("outer", new java.io.IOException("inner"))`, nil)
	if e.err == nil || e.err.Name != "java.lang.IllegalStateException" || e.err.Value != "outer" || !strings.Contains(e.err.Traceback, "Caused by: java.io.IOException: inner\n") {
		t.Fatalf("exception with a cause: %+v", e.err)
	}
	e = java("int y = 1;\nundefinedName + 1;\nSystem.out.println(\"not reached\");", nil)
	if e.err == nil || e.err.Name != "CompilationException" || !strings.HasPrefix(e.err.Value, "cannot find symbol") ||
		!strings.Contains(e.err.Traceback, "undefinedName + 1;\n^") || e.stdout != "" {
		t.Fatalf("compile error: %+v stdout %q", e.err, e.stdout)
	}
	if e := java("y", nil); e.text() != "1" {
		t.Fatalf("snippets before a failing one ran: %q %+v", e.text(), e.err)
	}
	e = java("void g() { h(); }\ng()", nil)
	if e.err == nil || e.err.Name != "jdk.jshell.UnresolvedReferenceException" || e.err.Value != "g cannot be used until method h() is declared" {
		t.Fatalf("a method calling an undeclared one: %+v", e.err)
	}
	if e := java("int z = ", nil); e.err == nil || e.err.Name != "CompilationException" {
		t.Fatalf("unfinished code: %+v", e.err)
	}

	// Per-execution env vars are System properties, as in E2B's kernel, and
	// seen by System.getenv, as env vars are in the other languages;
	// afterwards what was there before (nothing, or the kernel's own value)
	// comes back. Values arrive byte for byte.
	value := "b'a\"r\n\u00e9 <&> \\ \\u0041 $HOME `x` \u2028"
	get := `System.getProperty("FOO", "unset") + "|" + System.getenv("FOO") + "|" + System.getProperty("_U", "unset")`
	if e := java(get, map[string]string{"FOO": value, "_U": "u"}); e.text() != value+"|"+value+"|u" || e.err != nil {
		t.Fatalf("with env_vars: %q (error %+v)", e.text(), e.err)
	}
	if e := java(get, nil); e.text() != "unset|null|unset" {
		t.Fatalf("env vars not reverted: %q", e.text())
	}
	java(`System.setProperty("FOO", "mine")`, nil)
	java(get, map[string]string{"FOO": "tmp"})
	if e := java(`System.getProperty("FOO") + "|" + System.getenv("FOO")`, nil); e.text() != "mine|null" {
		t.Fatalf("after env_vars over a value of the kernel's own: %q; want its value back", e.text())
	}
	// An interrupt (the client gave up: a timeout) stops the running code,
	// whether it computes or sleeps, and keeps the kernel and its state.
	for _, code := range []string{"while (true) { x++; }", "Thread.sleep(100_000);"} {
		c.abandon(map[string]any{"code": code, "language": "java"}, time.Second)
		if e := java("twice(21)", nil); e.err != nil || e.text() != "42" {
			t.Fatalf("after abandoning %q: %q %+v; want the same kernel", code, e.text(), e.err)
		}
	}

	resp, raw := c.do("POST", "/contexts", map[string]any{"language": "java", "cwd": otherCwd}, header...)
	var ctx struct{ ID, Language, Cwd string }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &ctx) != nil || ctx.Language != "java" || ctx.Cwd != otherCwd {
		t.Fatalf("create Java context: %s %s", resp.Status, raw)
	}
	in := func(code string) execution {
		return c.execute(map[string]any{"code": code, "context_id": ctx.ID}, header...)
	}
	if e := in(`System.getProperty("user.dir")`); e.text() != otherCwd {
		t.Fatalf("new context's cwd: %q %+v", e.text(), e.err)
	}
	if e := in("x"); e.err == nil || e.err.Name != "CompilationException" {
		t.Fatalf("new context sees the default one's x: %q %+v", e.text(), e.err)
	}
	if e := in("System.exit(3)"); e.err == nil || e.err.Name != errContextRestarting {
		t.Fatalf("kernel exit: %+v", e.err)
	}
	if e := in(`"back"`); e.text() != "back" {
		t.Fatalf("after a restart: %q %+v", e.text(), e.err)
	}
}

func TestJavaSandboxEnvVars(t *testing.T) {
	t.Parallel()
	requireJDK(t)
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"SANDBOX_VAR":"from-agent"}`))
	}))
	defer agent.Close()
	c := realServer(t, Config{AgentURL: agent.URL})
	get := map[string]any{"code": `System.getProperty("SANDBOX_VAR") + System.getenv("SANDBOX_VAR")`, "language": "java"}
	if e := c.execute(get); e.text() != "from-agentfrom-agent" {
		t.Fatalf("sandbox env var: %q (error %+v)", e.text(), e.err)
	}
	over := map[string]any{"code": get["code"], "language": "java", "env_vars": map[string]string{"SANDBOX_VAR": "override"}}
	if e := c.execute(over); e.text() != "overrideoverride" {
		t.Fatalf("override: %q", e.text())
	}
	if e := c.execute(get); e.text() != "from-agentfrom-agent" {
		t.Fatalf("after override: %q, want the sandbox value back", e.text())
	}
}
