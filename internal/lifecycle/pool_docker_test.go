package lifecycle_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
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
	if testing.Short() {
		t.Skip("skipping: needs Docker (-short)")
	}
	image := os.Getenv("WARREN_TEST_IMAGE")
	if image == "" {
		image = "warren/base"
	}
	rt := dockerRuntime(t)
	imageID, err := rt.ImageID(t.Context(), image)
	if err != nil {
		t.Skipf("skipping: image %s is not on the engine (build it, or set WARREN_TEST_IMAGE): %v", image, err)
	}
	ac := agentclient.New()
	median := func(pool int) time.Duration {
		st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "warren.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		// The image is pinned by ID: a rebuild elsewhere must not empty the pool.
		m, err := lifecycle.New(lifecycle.Config{Runtime: rt, Agent: ac, Store: st, BaseImage: imageID, WarmPool: pool})
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

// dockerRuntime returns a runtime with the real agent under a label of its
// own, removing what it made at the end, or skips without an engine.
func dockerRuntime(t *testing.T) *docker.Runtime {
	t.Helper()
	agent := buildAgent(t)
	rt, err := docker.New(docker.Config{AgentPath: agent, ManagedValue: testLabel("test-pool-")})
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
