package lifecycle_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/agentclient"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

// gvisorHostEnv names the Docker engine the gVisor tests run on: one with
// runsc registered as "runsc" and experimental mode on
// (scripts/setup-gvisor.sh start makes one beside the main engine).
const gvisorHostEnv = "WARREN_GVISOR_DOCKER_HOST"

// gvisorRuntime returns a runtime on the gVisor engine with the real agent
// and a network of its own, removing its containers at the end; it skips
// when WARREN_GVISOR_DOCKER_HOST is not set.
func gvisorRuntime(t *testing.T) *docker.Runtime {
	t.Helper()
	host := os.Getenv(gvisorHostEnv)
	if host == "" {
		t.Skipf("skipping: set %s to a Docker engine with runsc and experimental mode (scripts/setup-gvisor.sh start)", gvisorHostEnv)
	}
	t.Setenv("DOCKER_HOST", host)
	agent := buildAgent(t)
	rt, err := docker.New(docker.Config{AgentPath: agent, Network: "wgvtest", Instance: testLabel("test-gv-")})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.CheckRuntime(t.Context(), sandbox.RuntimeGVisor); err != nil {
		rt.Close()
		t.Fatalf("%s=%s: %v", gvisorHostEnv, host, err)
	}
	removeAtEnd(t, rt)
	return rt
}

func gvisorManager(t *testing.T, rt *docker.Runtime, dir string, tweak func(*lifecycle.Settings)) *lifecycle.Manager {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	ac := agentclient.New()
	set := noPools()
	set.SandboxRuntime, set.FreezeMaxAge, set.MaxFrozen = sandbox.RuntimeGVisor, -1, -1
	if tweak != nil {
		tweak(&set)
	}
	m, err := lifecycle.New(lifecycle.Deps{Runtime: rt, Agent: ac, Store: st, Commands: ac}, set)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); st.Close() })
	return m
}

func run(t *testing.T, sb sandbox.Sandbox, cmd string) string {
	t.Helper()
	code, out, err := agentclient.New().RunCommand(t.Context(), sb.AgentAddr, sb.EnvdAccessToken, "user", "", cmd, nil)
	if err != nil || code != 0 {
		t.Fatalf("%q: exit %d, %v; output %q", cmd, code, err, out)
	}
	return strings.TrimSpace(out)
}

// requireRestored fails the test at once when the sandbox's log says its
// checkpoint could not be restored (it then starts afresh), with the
// engine's reason.
func requireRestored(t *testing.T, m *lifecycle.Manager, id string) {
	t.Helper()
	if why := restoreFailure(t, m, id); why != "" {
		t.Fatal(why)
	}
}

// restoreFailure returns what the sandbox's log says of a checkpoint that
// could not be restored, "" if none.
func restoreFailure(t *testing.T, m *lifecycle.Manager, id string) string {
	logs, err := m.Logs(t.Context(), sandbox.DefaultTeamID, id, sandbox.LogQuery{})
	if err != nil {
		return err.Error()
	}
	for _, l := range logs {
		if strings.Contains(l.Message, "could not be restored") {
			return l.Message + ": " + l.Fields["error"]
		}
	}
	return ""
}

// portAnswer asks a server inside the sandbox, through the agent's
// tunnel, for one line.
func portAnswer(t *testing.T, sb sandbox.Sandbox, port int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := agentclient.New().DialTunnel(ctx, sb.AgentAddr, sb.AgentSecret, port)
	if err != nil {
		t.Fatalf("tunnel to port %d: %v", port, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET / HTTP/1.0\r\n\r\n")
	var last string
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		last = sc.Text()
	}
	return strings.TrimSpace(last)
}

// TestGVisorCheckpointDocker runs a sandbox under gVisor, checkpoints it
// (operator stop), restarts the server, and resumes it: the processes,
// their memory, a server listening inside, the sandbox's env and the
// agent's token all come back without the agent being re-initialised.
func TestGVisorCheckpointDocker(t *testing.T) {
	rt := gvisorRuntime(t)
	dir := t.TempDir()
	m := gvisorManager(t, rt, dir, nil)
	ctx := t.Context()
	sb, err := m.Create(ctx, lifecycle.CreateRequest{TeamID: sandbox.DefaultTeamID, Timeout: 5 * time.Minute, Secure: true,
		EnvVars: map[string]string{"GREETING": "hello"}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if run(t, sb, "dmesg 2>/dev/null | head -1 | grep -c gVisor || true") != "1" {
		t.Errorf("the sandbox does not run under gVisor")
	}
	// A process holding a random value only in memory, which it serves
	// on port 8000, and writes to a file now and then (through a rename,
	// so a read never sees the file half-written). The file appears once
	// the port listens; Python's start under gVisor on a loaded machine
	// takes seconds, hence the long wait.
	run(t, sb, `nohup python3 -c '
import http.server, os, threading, time
v = os.urandom(8).hex()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write((v + " " + os.environ.get("GREETING", "")).encode())
srv = http.server.HTTPServer(("127.0.0.1", 8000), H)
def tick():
    while True:
        open("/tmp/mem.new", "w").write(v); os.replace("/tmp/mem.new", "/tmp/mem"); time.sleep(0.1)
threading.Thread(target=tick, daemon=True).start()
srv.serve_forever()
' >/dev/null 2>&1 &
for i in $(seq 600); do [ -s /tmp/mem ] && break; sleep 0.1; done; test -s /tmp/mem`)
	before := portAnswer(t, sb, 8000)
	if !strings.HasSuffix(before, " hello") {
		t.Fatalf("server in the sandbox answered %q", before)
	}

	mode, err := m.Stop(ctx, sandbox.DefaultTeamID, sb.ID)
	if err != nil || mode != sandbox.PauseCheckpointed {
		t.Fatalf("Stop = %q, %v; want checkpointed", mode, err)
	}
	if c, err := rt.Inspect(ctx, sb.ContainerID); err != nil || c.Running {
		t.Fatalf("checkpointed container: %+v, %v; want stopped", c, err)
	}
	// A new server on the same store adopts the checkpointed sandbox.
	m.Close()
	m = gvisorManager(t, rt, dir, nil)
	got, err := m.Get(ctx, sandbox.DefaultTeamID, sb.ID)
	if err != nil || got.State != sandbox.StatePaused || got.PauseMode != sandbox.PauseCheckpointed {
		t.Fatalf("after a server restart: %+v, %v", got, err)
	}
	// Its checkpoint seeds a fork, which goes on with the process; the
	// source stays paused.
	forks, err := m.Fork(ctx, sandbox.DefaultTeamID, sb.ID, time.Minute, 1)
	if err != nil || forks[0].Err != nil {
		t.Fatalf("fork of the checkpointed sandbox: %v, %+v", err, forks)
	}
	if got := portAnswer(t, forks[0].Sandbox, 8000); got != before {
		t.Errorf("in the fork the server answers %q, want %q", got, before)
	}
	if got, err := m.Get(ctx, sandbox.DefaultTeamID, sb.ID); err != nil || got.State != sandbox.StatePaused || got.PauseMode != sandbox.PauseCheckpointed {
		t.Fatalf("source after the fork: %+v, %v; want paused checkpointed", got, err)
	}
	if err := m.Kill(ctx, sandbox.DefaultTeamID, forks[0].Sandbox.ID); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	sb, resumed, err := m.Connect(ctx, sandbox.DefaultTeamID, sb.ID, time.Minute, true)
	if err != nil || !resumed {
		t.Fatalf("connect: resumed %v, %v", resumed, err)
	}
	t.Logf("restore took %v", time.Since(start))
	requireRestored(t, m, sb.ID)
	// Neither the checkpoint nor the reference a restore hands the
	// engine outlives the restore.
	if root, err := rt.DataRoot(ctx); err != nil {
		t.Fatal(err)
	} else if n, err := docker.CheckpointSize(root, sb.ContainerID); n != 0 || (err != nil && !os.IsNotExist(err)) {
		t.Errorf("after restore the container keeps %d bytes of checkpoints (%v)", n, err)
	}
	if after := portAnswer(t, sb, 8000); after != before {
		t.Errorf("after restore the server answers %q, want %q", after, before)
	}
	if v := run(t, sb, "sleep 0.3; cat /tmp/mem; echo; echo $GREETING"); v != strings.TrimSuffix(before, " hello")+"\nhello" {
		t.Errorf("after restore: %q", v)
	}
	logs, err := m.Logs(ctx, sandbox.DefaultTeamID, sb.ID, sandbox.LogQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, l := range logs {
		msgs = append(msgs, l.Message+" "+l.Fields["mode"])
	}
	if s := strings.Join(msgs, "; "); !strings.Contains(s, "sandbox paused checkpointed") || !strings.Contains(s, "sandbox resumed checkpointed") {
		t.Errorf("logs: %s", s)
	}
	if err := m.Kill(ctx, sandbox.DefaultTeamID, sb.ID); err != nil {
		t.Fatal(err)
	}
}

// TestGVisorDemoteFrozenDocker pauses a gVisor sandbox keeping memory,
// lets the freeze limit demote it, and checks that demotion checkpoints it
// and that resume restores it.
func TestGVisorDemoteFrozenDocker(t *testing.T) {
	rt := gvisorRuntime(t)
	m := gvisorManager(t, rt, t.TempDir(), func(c *lifecycle.Settings) {
		c.FreezeMaxAge, c.TickInterval = 500*time.Millisecond, 100*time.Millisecond
	})
	ctx := t.Context()
	sb, err := m.Create(ctx, lifecycle.CreateRequest{TeamID: sandbox.DefaultTeamID, Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	// The value lives only in the process's memory; it rewrites the file
	// through a rename, so a read never sees it half-written.
	run(t, sb, `nohup sh -c 'v=$(cat /proc/sys/kernel/random/uuid); while true; do echo $v > /tmp/mem.new; mv /tmp/mem.new /tmp/mem; sleep 0.1; done' >/dev/null 2>&1 &
sleep 0.3`)
	before := run(t, sb, "cat /tmp/mem")
	if err := m.Pause(ctx, sandbox.DefaultTeamID, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _ := m.Get(ctx, sandbox.DefaultTeamID, sb.ID)
		if got.PauseMode == sandbox.PauseCheckpointed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not demoted to checkpointed: %+v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	sb, err = m.Resume(ctx, sandbox.DefaultTeamID, sb.ID, time.Minute, lifecycle.ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	requireRestored(t, m, sb.ID)
	if after := run(t, sb, "sleep 0.3; cat /tmp/mem"); after != before {
		t.Errorf("after restore the process writes %q, want %q", after, before)
	}
}

// TestGVisorRestoreAtOnceDocker checkpoints and restores three sandboxes
// at once, over and over, each restore straight after its checkpoint: the
// engine's upload of a checkpoint to containerd collided with the blob the
// checkpoint itself left there (moby/moby#42900), and the sandboxes came
// back afresh, without their processes.
func TestGVisorRestoreAtOnceDocker(t *testing.T) {
	rt := gvisorRuntime(t)
	m := gvisorManager(t, rt, t.TempDir(), nil)
	ctx := t.Context()
	var wg sync.WaitGroup
	for range 3 {
		sb, err := m.Create(ctx, lifecycle.CreateRequest{TeamID: sandbox.DefaultTeamID, Timeout: 5 * time.Minute})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		run(t, sb, `nohup sleep 1000 >/dev/null 2>&1 &`)
		wg.Go(func() {
			for round := range 4 {
				if mode, err := m.Stop(ctx, sandbox.DefaultTeamID, sb.ID); err != nil || mode != sandbox.PauseCheckpointed {
					t.Errorf("round %d: Stop = %q, %v; want checkpointed", round, mode, err)
					return
				}
				if _, err := m.Resume(ctx, sandbox.DefaultTeamID, sb.ID, time.Minute, lifecycle.ResumeOptions{}); err != nil {
					t.Errorf("round %d: resume: %v", round, err)
					return
				}
				if why := restoreFailure(t, m, sb.ID); why != "" {
					t.Errorf("round %d: %s", round, why)
					return
				}
			}
		})
		t.Cleanup(func() { m.Kill(context.Background(), sandbox.DefaultTeamID, sb.ID) })
	}
	wg.Wait()
}

// TestGVisorCheckpointFailsDocker makes the engine fail to write a
// checkpoint (a file where its checkpoints directory goes) and checks that
// the sandbox ends up stopped, with the engine's reason in its log, and
// that it still resumes.
func TestGVisorCheckpointFailsDocker(t *testing.T) {
	rt := gvisorRuntime(t)
	root, err := rt.DataRoot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	m := gvisorManager(t, rt, t.TempDir(), nil)
	ctx := t.Context()
	sb, err := m.Create(ctx, lifecycle.CreateRequest{TeamID: sandbox.DefaultTeamID, Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	dir := filepath.Join(root, "containers", sb.ContainerID, "checkpoints")
	if err := os.RemoveAll(dir); err != nil {
		t.Skipf("skipping: cannot reach the engine's data root %s (run as root on its host): %v", root, err)
	}
	if err := os.WriteFile(dir, []byte("in the way"), 0o600); err != nil {
		t.Skipf("skipping: cannot write in the engine's data root: %v", err)
	}
	mode, err := m.Stop(ctx, sandbox.DefaultTeamID, sb.ID)
	if err != nil || mode != sandbox.PauseStopped {
		t.Fatalf("Stop with a broken checkpoint dir = %q, %v; want stopped", mode, err)
	}
	logs, err := m.Logs(ctx, sandbox.DefaultTeamID, sb.ID, sandbox.LogQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, l := range logs {
		if strings.Contains(l.Message, "checkpoint failed; sandbox paused stopped instead") && l.Fields["error"] != "" {
			found = true
			t.Logf("logged reason: %s", l.Fields["error"])
		}
	}
	if !found {
		t.Errorf("no log entry says why the checkpoint failed: %+v", logs)
	}
	os.Remove(dir)
	sb, _, err = m.Connect(ctx, sandbox.DefaultTeamID, sb.ID, time.Minute, true)
	if err != nil {
		t.Fatalf("connect after a failed checkpoint: %v", err)
	}
	if got := run(t, sb, "echo ok"); got != "ok" {
		t.Errorf("after resume: %q", got)
	}
}

// TestGVisorKillFrozenDocker kills a frozen gVisor sandbox: its container
// goes, and so do runsc's sandbox and the containerd shim, which runsc
// leaves running when asked to signal a paused container.
func TestGVisorKillFrozenDocker(t *testing.T) {
	rt := gvisorRuntime(t)
	m := gvisorManager(t, rt, t.TempDir(), nil)
	ctx := t.Context()
	sb, err := m.Create(ctx, lifecycle.CreateRequest{TeamID: sandbox.DefaultTeamID, Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := m.Pause(ctx, sandbox.DefaultTeamID, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Get(ctx, sandbox.DefaultTeamID, sb.ID); got.PauseMode != sandbox.PauseFrozen {
		t.Fatalf("paused as %q, want frozen", got.PauseMode)
	}
	if err := m.Kill(ctx, sandbox.DefaultTeamID, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Inspect(ctx, sb.ContainerID); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("container after kill: %v, want not found", err)
	}
	// Processes naming the container ID: runsc's sandbox, gofer and shim.
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := exec.Command("pgrep", "-f", sb.ContainerID).Output()
		if len(strings.TrimSpace(string(out))) == 0 {
			break
		}
		if time.Now().After(deadline) {
			ps, _ := exec.Command("pgrep", "-af", sb.ContainerID).Output()
			t.Fatalf("processes of the killed sandbox are left:\n%s", ps)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
