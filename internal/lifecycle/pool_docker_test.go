package lifecycle_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/agentclient"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

// TestPoolLatencyDocker creates sandboxes on the local engine with and
// without the warm pool and checks that the pool makes creates faster.
// It needs Docker and an image to run the real agent in:
// $WARREN_TEST_IMAGE, default warren/base (scripts build it; test.sh
// does before the Go tests).
func TestPoolLatencyDocker(t *testing.T) {
	rt := dockerRuntime(t)
	_, imageID := dockerTestImage(t, rt)
	ac := agentclient.New()
	median := func(pool int) time.Duration {
		st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "warren.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		// The image is pinned by ID: a rebuild elsewhere must not empty the pool.
		set := noPools()
		set.BaseImage, set.WarmPool = imageID, pool
		m, err := lifecycle.New(lifecycle.Deps{Runtime: rt, Agent: ac, Store: st}, set)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		var took []time.Duration
		for range 5 {
			waitPool(t, m, pool)
			start := time.Now()
			sb, err := m.Create(t.Context(), lifecycle.CreateRequest{TeamID: sandbox.DefaultTeamID, Timeout: time.Minute})
			if err != nil {
				t.Fatalf("pool %d: create: %v", pool, err)
			}
			took = append(took, time.Since(start))
			if c, err := rt.Inspect(t.Context(), sb.ContainerID); err != nil || c.SandboxID != sb.ID || !c.Running {
				t.Errorf("pool %d: sandbox %s's container: %+v, %v", pool, sb.ID, c, err)
			}
			if err := m.Kill(t.Context(), sandbox.DefaultTeamID, sb.ID); err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(took)
		t.Logf("warm pool %d: create medians %v (all: %v)", pool, took[len(took)/2], took)
		return took[len(took)/2]
	}
	cold, warm := median(0), median(2)
	if warm*2 > cold {
		t.Errorf("create with the pool takes %v, without %v; want under half", warm, cold)
	}
}

// TestPoolCodeInterpreterDocker claims a pooled code-interpreter container
// on the local engine and runs code in it: the agent in the pooled
// container serves the code interpreter, and the claim hands it over
// whole. It needs Docker and the image warren/code-interpreter
// (bin/warren image build code-interpreter).
func TestPoolCodeInterpreterDocker(t *testing.T) {
	const image = "warren/code-interpreter"
	rt := dockerRuntime(t)
	imageID, err := rt.ImageID(t.Context(), image)
	if err != nil {
		t.Skipf("skipping: image %s is not on the engine (bin/warren image build code-interpreter): %v", image, err)
	}
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ac := agentclient.New()
	// Pinned by ID, as above; only the code interpreter's pool.
	set := noPools()
	set.CodeInterpreterImage, set.WarmPoolCodeInterpreter = imageID, 1
	m, err := lifecycle.New(lifecycle.Deps{Runtime: rt, Agent: ac, Store: st}, set)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	waitPool(t, m, 1)
	list, err := rt.List(t.Context())
	if err != nil || len(list) != 1 || list[0].Labels[sandbox.LabelPool] != "true" {
		t.Fatalf("containers with the pool full: %+v, %v; want one pooled", list, err)
	}
	pooled := list[0]

	start := time.Now()
	sb, err := m.Create(t.Context(), lifecycle.CreateRequest{TeamID: sandbox.DefaultTeamID, Template: lifecycle.CodeInterpreterTemplate, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Since(start)
	if sb.ContainerID != pooled.ID {
		t.Errorf("sandbox on container %s, want the pooled %s", sb.ContainerID, pooled.ID)
	}
	out := execute(t, ac, sb, "1+1")
	t.Logf("create from the pool %v, first execution %v after it", created, time.Since(start)-created)
	if !strings.Contains(out, `"type":"result","text":"2"`) {
		t.Errorf("execution of 1+1 gave:\n%s", out)
	}
}

// execute runs python code in a sandbox's code interpreter (port 49999,
// through the agent's tunnel) and returns the NDJSON stream.
func execute(t *testing.T, ac *agentclient.Client, sb sandbox.Sandbox, code string) string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return ac.DialTunnel(ctx, sb.AgentAddr, sb.AgentSecret, 49999)
		},
	}}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"code": code})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://sandbox/execute", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("execute: %d %s, %v", res.StatusCode, out, err)
	}
	return string(out)
}

// noPools are the default settings without warm pools, which tests that
// want one ask for.
func noPools() lifecycle.Settings {
	s := lifecycle.DefaultSettings()
	s.WarmPool, s.WarmPoolCodeInterpreter = 0, 0
	return s
}

func waitPool(t *testing.T, m *lifecycle.Manager, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for m.WarmPoolReady() < n {
		if time.Now().After(deadline) {
			t.Fatalf("warm pool not refilled to %d in a minute", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dockerTestImage returns the image Docker tests run the agent in,
// $WARREN_TEST_IMAGE (default warren/base), and its ID; it skips the test
// when the engine lacks it.
func dockerTestImage(t *testing.T, rt *docker.Runtime) (image, id string) {
	t.Helper()
	image = os.Getenv("WARREN_TEST_IMAGE")
	if image == "" {
		image = "warren/base"
	}
	id, err := rt.ImageID(t.Context(), image)
	if err != nil {
		t.Skipf("skipping: image %s is not on the engine (build it, or set WARREN_TEST_IMAGE): %v", image, err)
	}
	return image, id
}

// dockerRuntime returns a runtime with the real agent under a label of its
// own, removing what it made at the end; it skips the test with -short or
// without an engine.
func dockerRuntime(t *testing.T) *docker.Runtime {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping: needs Docker (-short)")
	}
	agent := buildAgent(t)
	rt, err := docker.New(docker.Config{AgentPath: agent, Instance: testLabel("test-pool-")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := rt.Ping(ctx); err != nil {
		rt.Close()
		t.Skipf("skipping: no Docker engine reachable (set DOCKER_HOST or start dockerd): %v", err)
	}
	removeAtEnd(t, rt)
	return rt
}

// buildAgent builds cmd/warren-agent, static, into a temporary directory
// and returns its path.
func buildAgent(t *testing.T) string {
	t.Helper()
	agent := filepath.Join(t.TempDir(), "warren-agent")
	cmd := exec.Command(filepath.Join(goruntime.GOROOT(), "bin", "go"), "build", "-o", agent, "github.com/warrenhq/warren/cmd/warren-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	return agent
}

// testLabel returns prefix and a random suffix: a managed label that no
// other test run shares.
func testLabel(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// removeAtEnd removes every container rt manages, then closes it, when
// the test ends. (Close alone keeps pooled containers for a restart.)
func removeAtEnd(t *testing.T, rt *docker.Runtime) {
	t.Cleanup(func() {
		ctx := context.Background()
		list, _ := rt.List(ctx)
		for _, c := range list {
			rt.Remove(ctx, c.ID)
		}
		rt.Close()
	})
}
