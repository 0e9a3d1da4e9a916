package codeinterp

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestBash(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("skipping: no bash on PATH")
	}
	c := realServer(t, Config{})
	dir := t.TempDir()
	_, raw := c.do("POST", "/contexts", map[string]any{"language": "bash", "cwd": dir})
	var ctx struct{ ID string }
	json.Unmarshal(raw, &ctx)
	run := func(code string, env map[string]string) execution {
		return c.execute(map[string]any{"code": code, "context_id": ctx.ID, "env_vars": env})
	}
	if e := run("pwd", nil); e.stdout != dir+"\n" || e.count != 1 {
		t.Fatalf("pwd = %q count %d", e.stdout, e.count)
	}
	run("mkdir sub && cd sub; X=kept", nil)
	if e := run(`echo "$PWD $X"; printf 'no newline'`, nil); e.stdout != dir+"/sub kept\nno newline" {
		t.Fatalf("state: %q", e.stdout)
	}
	if e := run("echo $FOO", map[string]string{"FOO": "it's"}); e.stdout != "it's\n" {
		t.Fatalf("env var: %q", e.stdout)
	}
	if e := run("echo ${FOO:-default}", nil); e.stdout != "default\n" {
		t.Fatalf("env var not reverted: %q", e.stdout)
	}
	e := run("echo oops >&2; false", nil)
	if e.stderr != "oops\n" || e.err == nil || e.err.Value != "1" {
		t.Fatalf("failure: stderr %q error %+v", e.stderr, e.err)
	}
	if e := run("read line; echo got:$line", nil); e.stdout != "got:\n" {
		t.Fatalf("stdin is not /dev/null: %q", e.stdout)
	}
	c.abandon(map[string]any{"code": "sleep 100; echo not-reached", "context_id": ctx.ID}, 300*time.Millisecond)
	if e := run("echo $X", nil); e.stdout != "kept\n" || e.err != nil {
		t.Fatalf("after an interrupted cell: %q %+v; want the same shell", e.stdout, e.err)
	}
	if e := run("exit 3", nil); e.err == nil || e.err.Name != errContextRestarting {
		t.Fatalf("exit: %+v", e.err)
	}
	if e := run("echo back; echo $X", nil); e.stdout != "back\n\n" {
		t.Fatalf("after exit: %q", e.stdout)
	}
}

func requireNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("skipping: no node on PATH (apt-get install nodejs)")
	}
}

func TestJavaScript(t *testing.T) {
	t.Parallel()
	requireNode(t)
	c := realServer(t, Config{})
	js := func(code string) execution { return c.execute(map[string]any{"code": code, "language": "js"}) }
	if e := js(`console.log("Hello World!")`); strings.Join(lines(e.stdout), "|") != "Hello World!" || len(e.lines) != 3 {
		t.Fatalf("console.log: %+v", e.lines)
	}
	if e := js("const z = 1"); e.err != nil || len(e.results) != 0 {
		t.Fatalf("declaration: %+v %+v", e.err, e.results)
	}
	if e := js("z"); e.text() != "1" {
		t.Fatalf("state: %q %+v", e.text(), e.err)
	}
	if e := js("async function main() { return 'Hello' }\n\nawait main()"); e.text() != "Hello" {
		t.Fatalf("top-level await: %q %+v", e.text(), e.err)
	}
	if e := js("import { basename } from 'node:path'\nimport * as os from 'node:os'\nbasename('/a/b') + typeof os.cpus"); e.text() != "bfunction" {
		t.Fatalf("imports: %q %+v", e.text(), e.err)
	}
	if e := js("({a: [1, 2]})"); e.text() != "{ a: [ 1, 2 ] }" {
		t.Fatalf("object result: %q", e.text())
	}
	if e := js("null.x"); e.err == nil || e.err.Name != "TypeError" || !strings.Contains(e.err.Traceback, "TypeError") {
		t.Fatalf("error: %+v", e.err)
	}
	if e := c.execute(map[string]any{"code": "process.env.FOO", "language": "js", "env_vars": map[string]string{"FOO": "bar"}}); e.text() != "bar" {
		t.Fatalf("env var: %q", e.text())
	}
	if e := js("process.env.FOO"); len(e.results) != 0 {
		t.Fatalf("env var not reverted: %+v", e.results)
	}
	for _, code := range []string{"while (true) {}", "await new Promise(() => {})"} {
		c.abandon(map[string]any{"code": code, "language": "js"}, 300*time.Millisecond)
		if e := js("z + 1"); e.text() != "2" {
			t.Fatalf("after abandoning %q: %q %+v; want the same kernel", code, e.text(), e.err)
		}
	}
}

func TestTypeScript(t *testing.T) {
	t.Parallel()
	requireNode(t)
	if exec.Command("node", "-e", "try { require('typescript') } catch { require('/usr/share/nodejs/typescript') }").Run() != nil {
		t.Skip("skipping: node cannot load the typescript package (apt-get install node-typescript)")
	}
	c := realServer(t, Config{})
	e := c.execute(map[string]any{"code": "function subtract(x: number, y: number): number {\n  return x - y;\n}\n\nsubtract(1, 2)", "language": "ts"})
	if e.text() != "-1" {
		t.Fatalf("typescript: %q %+v", e.text(), e.err)
	}
}
