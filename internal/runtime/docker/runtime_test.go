package docker

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

func testSpec(t testing.TB, image string) sandbox.ContainerSpec {
	return sandbox.ContainerSpec{
		SandboxID:   "t" + randomID(t),
		Image:       image,
		Labels:      map[string]string{sandbox.LabelTeam: "team1"},
		CPUCount:    1,
		MemoryMB:    128,
		PidsLimit:   64,
		AgentSecret: "s3cret",
	}
}

func TestLifecycle(t *testing.T) {
	rt := newTestRuntime(t)
	ctx := t.Context()
	spec := testSpec(t, importImage(t, rt))
	spec.AgentArgs = []string{"-code-interpreter", "x y"}

	c, err := rt.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), c.ID) })
	if !c.Running || c.SandboxID != spec.SandboxID || !strings.HasPrefix(c.AgentAddr, "127.0.0.1:") {
		t.Fatalf("Create returned %+v", c)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := waitAgent(waitCtx, c.AgentAddr); err != nil {
		t.Fatalf("agent never answered: %v", err)
	}
	if got, want := getBody(t, "http://"+c.AgentAddr+"/whoami"), "uid=0 host="+spec.SandboxID+` secret=s3cret pid=1 args=["-code-interpreter" "x y"]`; got != want {
		t.Errorf("agent sees %q, want %q", got, want)
	}

	list, err := rt.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != c.ID || list[0].AgentAddr != c.AgentAddr || list[0].Labels[sandbox.LabelTeam] != "team1" {
		t.Errorf("List = %+v, want just %+v", list, c)
	}

	if _, err := rt.Stats(ctx, c.ID); err != nil {
		t.Errorf("Stats: %v", err)
	}
	st, err := rt.Stats(ctx, c.ID)
	if err != nil || st.CPUCount != 1 || st.MemTotal != 128<<20 || st.MemUsed <= 0 {
		t.Errorf("Stats = %+v, %v; want 1 CPU, 128 MiB total, some memory used", st, err)
	}

	if err := rt.Freeze(ctx, c.ID); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	if in, _ := rt.Inspect(ctx, c.ID); !in.Paused || !in.Running {
		t.Errorf("after Freeze Inspect = %+v", in)
	}
	if _, err := (&http.Client{Timeout: 200 * time.Millisecond}).Get("http://" + c.AgentAddr + "/health"); err == nil {
		t.Error("a frozen agent answered")
	}
	if err := rt.Freeze(ctx, c.ID); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("Freeze twice: %v, want a conflict", err)
	}
	if err := rt.Thaw(ctx, c.ID); err != nil {
		t.Fatalf("Thaw: %v", err)
	}
	if err := waitAgent(waitCtx, c.AgentAddr); err != nil {
		t.Fatalf("agent did not answer after Thaw: %v", err)
	}

	if err := rt.Stop(ctx, c.ID); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if in, _ := rt.Inspect(ctx, c.ID); in.Running || in.AgentAddr != "" {
		t.Errorf("after Stop Inspect = %+v", in)
	}
	c2, err := rt.Start(ctx, c.ID)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := waitAgent(waitCtx, c2.AgentAddr); err != nil {
		t.Fatalf("agent did not answer after Start: %v", err)
	}

	if err := rt.Remove(ctx, c.ID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := rt.Inspect(ctx, c.ID); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("Inspect after Remove: %v, want not found", err)
	}
}

func TestCommit(t *testing.T) {
	rt := newTestRuntime(t)
	ctx := t.Context()
	spec := testSpec(t, importImage(t, rt))
	c, err := rt.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), c.ID) })

	ref := "warren-test-snap-" + randomID(t) + ":v1"
	if got, err := rt.Commit(ctx, c.ID, ref); err != nil || got != ref {
		t.Fatalf("Commit = %q, %v", got, err)
	}
	t.Cleanup(func() { rt.RemoveImage(context.Background(), ref) })
	img, err := rt.cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	cfg := img.Config
	if !slices.Equal(cfg.Entrypoint, []string{"/bin/true"}) || !slices.Equal(cfg.Cmd, []string{"x"}) || slices.Contains(cfg.Env, "WARREN_AGENT_SECRET=s3cret") || cfg.Labels[sandbox.LabelManaged] != "" {
		t.Errorf("snapshot keeps Warren's settings: entrypoint %q cmd %q env %q labels %v", cfg.Entrypoint, cfg.Cmd, cfg.Env, cfg.Labels)
	}

	// A sandbox made from the snapshot runs like any other, and one asking
	// for more CPUs than the engine has gets them all.
	spec2 := testSpec(t, ref)
	spec2.CPUCount = 1000
	c2, err := rt.Create(ctx, spec2)
	if err != nil {
		t.Fatalf("Create from snapshot: %v", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := waitAgent(waitCtx, c2.AgentAddr); err != nil {
		t.Errorf("agent from snapshot: %v", err)
	}
	if err := rt.RemoveImage(ctx, ref); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("RemoveImage of an image in use: %v, want a conflict", err)
	}
	if err := rt.Remove(ctx, c2.ID); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemoveImage(ctx, ref); err != nil {
		t.Fatalf("RemoveImage: %v", err)
	}
	if ok, err := rt.ImageExists(ctx, ref); ok || err != nil {
		t.Errorf("ImageExists after RemoveImage = %v, %v", ok, err)
	}
}

func TestNotFound(t *testing.T) {
	rt := newTestRuntime(t)
	ctx := t.Context()
	const id = "warren-no-such-container"
	checks := map[string]error{
		"Inspect":     func() error { _, err := rt.Inspect(ctx, id); return err }(),
		"Start":       func() error { _, err := rt.Start(ctx, id); return err }(),
		"Stop":        rt.Stop(ctx, id),
		"Freeze":      rt.Freeze(ctx, id),
		"Thaw":        rt.Thaw(ctx, id),
		"Remove":      rt.Remove(ctx, id),
		"Stats":       func() error { _, err := rt.Stats(ctx, id); return err }(),
		"Commit":      func() error { _, err := rt.Commit(ctx, id, "warren-test-x:1"); return err }(),
		"RemoveImage": rt.RemoveImage(ctx, "warren-test-no-such-image:1"),
		"Create": func() error {
			_, err := rt.Create(ctx, testSpec(t, "warren-test-no-such-image:1"))
			return err
		}(),
	}
	for name, err := range checks {
		if sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Errorf("%s: %v, want not found", name, err)
		}
	}
	if ok, err := rt.ImageExists(ctx, "warren-test-no-such-image:1"); ok || err != nil {
		t.Errorf("ImageExists = %v, %v", ok, err)
	}
}

// TestCreateFailureLeaksNothing makes the start fail (the agent's mount
// target is a directory in the image) and checks nothing is left behind.
func TestCreateFailureLeaksNothing(t *testing.T) {
	rt := newTestRuntime(t)
	ctx := t.Context()
	spec := testSpec(t, importImage(t, rt, ".warren/", ".warren/warren-agent/"))
	if c, err := rt.Create(ctx, spec); err == nil {
		rt.Remove(ctx, c.ID)
		t.Fatal("Create succeeded with an unusable image")
	}
	if _, err := rt.Inspect(ctx, ContainerName(spec.SandboxID)); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("the failed container is still there: %v", err)
	}
	// The name is free again.
	if _, err := rt.Create(ctx, spec); err == nil {
		t.Error("second Create succeeded with an unusable image")
	}
}

// TestCreateLatency measures create → agent answering, the part of
// Sandbox.create the runtime owns.
func TestCreateLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping latency measurement in -short mode")
	}
	rt := newTestRuntime(t)
	ctx := t.Context()
	image := importImage(t, rt)
	var create, ready []time.Duration
	for range 10 {
		start := time.Now()
		c, err := rt.Create(ctx, testSpec(t, image))
		if err != nil {
			t.Fatal(err)
		}
		create = append(create, time.Since(start))
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = waitAgent(waitCtx, c.AgentAddr)
		cancel()
		ready = append(ready, time.Since(start))
		rt.Remove(context.Background(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("Create returns: %s; agent answers: %s", percentiles(create), percentiles(ready))
}

func percentiles(d []time.Duration) string {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return "p50 " + d[len(d)/2].Round(time.Millisecond).String() + " max " + d[len(d)-1].Round(time.Millisecond).String()
}

// TestStopFrozen: demoting a frozen sandbox to stopped is Stop on a paused
// container, and it must not hang or fail.
func TestStopFrozen(t *testing.T) {
	rt := newTestRuntime(t)
	ctx := t.Context()
	c, err := rt.Create(ctx, testSpec(t, importImage(t, rt)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), c.ID) })
	if err := rt.Freeze(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := rt.Stop(ctx, c.ID); err != nil {
		t.Fatalf("Stop of a frozen container: %v", err)
	}
	t.Logf("Stop of a frozen container took %v", time.Since(start))
	if in, err := rt.Inspect(ctx, c.ID); err != nil || in.Running || in.Paused {
		t.Fatalf("after Stop: %+v, %v", in, err)
	}
	c2, err := rt.Start(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := waitAgent(waitCtx, c2.AgentAddr); err != nil {
		t.Fatalf("agent after restart: %v", err)
	}
}
