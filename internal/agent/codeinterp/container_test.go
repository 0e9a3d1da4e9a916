package codeinterp

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// containerImage is the image of the code-interpreter-v1 template, which
// `warren image build code-interpreter` makes.
const containerImage = sandbox.CodeInterpreterImage

// TestInContainer runs the server as the agent would, as root in a
// container of the code interpreter's image with kernels running as root
// (as in E2B's template) in /home/user, and drives it over a published port.
func TestInContainer(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping container test in -short mode")
	}
	if err := exec.Command("docker", "version").Run(); err != nil {
		t.Skipf("skipping: no usable Docker engine: %v", err)
	}
	if err := exec.Command("docker", "image", "inspect", containerImage).Run(); err != nil {
		t.Skipf("skipping: image %s is missing; build it with `warren image build code-interpreter` (on warren/base, from `warren image build` as root)", containerImage)
	}
	bin := filepath.Join(t.TempDir(), "serve")
	build := exec.Command("go", "build", "-o", bin, "./testdata/serve")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build server: %v\n%s", err, out)
	}
	out, err := exec.Command("docker", "run", "-d", "--rm", "-v", bin+":/serve:ro", "-e", "TRAFFIC_TOKEN=tt",
		"-p", "127.0.0.1::49999", containerImage, "/serve").Output()
	if err != nil {
		t.Fatalf("docker run: %v", err)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command("docker", "logs", "--tail", "50", id).CombinedOutput()
			t.Logf("container logs:\n%s", logs)
		}
		exec.Command("docker", "rm", "-f", id).Run()
	})
	port, err := exec.Command("docker", "port", id, "49999/tcp").Output()
	if err != nil {
		t.Fatalf("docker port: %v", err)
	}
	c := &client{t: t, base: "http://" + strings.TrimSpace(strings.Split(string(port), "\n")[0])}
	waitHealthy(t, c)
	tok := []string{headerTrafficToken, "tt"}
	if resp, _ := c.do("GET", "/contexts", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("no traffic token: %s, want 403", resp.Status)
	}

	start := time.Now()
	e := c.execute(map[string]any{"code": "import getpass, os; print(getpass.getuser(), os.getcwd())"}, tok...)
	t.Logf("first python execution %v", time.Since(start))
	if e.stdout != "root /home/user\n" {
		t.Fatalf("python user and cwd: %q %+v", e.stdout, e.err)
	}
	var rtts []time.Duration
	for range 50 {
		start := time.Now()
		if e := c.execute(map[string]any{"code": "1+1"}, tok...); e.text() != "2" {
			t.Fatalf("1+1 = %q", e.text())
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	t.Logf("1+1 round trip over HTTP: p50 %v, p90 %v", rtts[len(rtts)/2], rtts[len(rtts)*9/10])

	e = c.execute(map[string]any{"code": "import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [1, 2])\nplt.show()"}, tok...)
	if len(e.results) != 1 || e.results[0].PNG == "" {
		t.Fatalf("matplotlib: %+v %+v", e.err, e.results)
	}
	e = c.execute(map[string]any{"code": "import pandas as pd\npd.DataFrame({'a': [1, 2]})"}, tok...)
	if e.text() == "" || e.results[0].HTML == "" || e.results[0].Data == nil {
		t.Fatalf("pandas: %+v %+v", e.err, e.results)
	}
	if e := c.execute(map[string]any{"code": "process.cwd()", "language": "js"}, tok...); e.text() != "/home/user" {
		t.Fatalf("js: %q %+v", e.text(), e.err)
	}
	if e := c.execute(map[string]any{"code": "const f = (x: number): number => x * 2\nf(21)", "language": "ts"}, tok...); e.text() != "42" {
		t.Fatalf("ts: %q %+v", e.text(), e.err)
	}
	// A context may work in root's home, as E2B's tests expect.
	resp, raw := c.do("POST", "/contexts", map[string]any{"language": "python", "cwd": "/root"}, tok...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("context in /root: %s %s", resp.Status, raw)
	}
	if e := c.execute(map[string]any{"code": "whoami; pwd", "language": "bash"}, tok...); e.stdout != "root\n/home/user\n" {
		t.Fatalf("bash: %q %+v", e.stdout, e.err)
	}
	checkR(t, c, "/home/user", "/tmp", tok...)
	checkJava(t, c, "/home/user", "/tmp", tok...)
}

func waitHealthy(t *testing.T, c *client) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(c.base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server in the container never became healthy: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
