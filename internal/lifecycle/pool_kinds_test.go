package lifecycle

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/warmpool"
)

// The warm pool of code-interpreter sandboxes: the same mechanism as the
// base template's (pool_test.go), with the image and agent arguments of
// code-interpreter-v1.

const ciImage = "warren/code-interpreter"

var ciArgs = []string{"-code-interpreter"}

func withPools(base, ci int) func(*config) {
	return func(c *config) { c.WarmPool, c.WarmPoolCodeInterpreter = base, ci }
}

// newCIEnv is newEnv with the code-interpreter image built.
func newCIEnv(t *testing.T, tweak func(*config)) *env {
	t.Helper()
	e := &env{rt: fake.New("warren/base", "python:3.12", ciImage), agent: fake.NewAgent(), dir: t.TempDir()}
	e.start(t, tweak)
	return e
}

// pooledOf returns the pooled containers (see pooledContainers) whose agent
// runs with args, the pool's kind.
func (e *env) pooledOf(t *testing.T, args []string) []sandbox.Container {
	t.Helper()
	var out []sandbox.Container
	for _, c := range e.pooledContainers(t) {
		if got, _ := e.rt.AgentArgsOf(c.ID); slices.Equal(got, args) {
			out = append(out, c)
		}
	}
	return out
}

// poolEvent returns the "pool" field of a sandbox's "sandbox created" event.
func (e *env) poolEvent(t *testing.T, id string) string {
	t.Helper()
	logs, err := e.m.Logs(context.Background(), team, id, sandbox.LogQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range logs {
		if l.Message == "sandbox created" {
			return l.Fields["pool"]
		}
	}
	t.Fatalf("sandbox %s has no created event: %+v", id, logs)
	return ""
}

func TestPoolCodeInterpreterClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newCIEnv(t, withPools(1, 2))
		synctest.Wait()
		base, ci := e.pooledOf(t, nil), e.pooledOf(t, ciArgs)
		if len(base) != 1 || len(ci) != 2 {
			t.Fatalf("pool after start: %d base, %d code-interpreter containers; want 1 and 2", len(base), len(ci))
		}
		want := map[string]int{BaseTemplate: 1, CodeInterpreterTemplate: 2}
		st := e.m.ServerStats(context.Background())
		if diff := cmp.Diff(want, st.PoolReady); diff != "" {
			t.Errorf("PoolReady (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, st.PoolSize); diff != "" {
			t.Errorf("PoolSize (-want +got):\n%s", diff)
		}

		sb := e.create(t, CreateRequest{Template: CodeInterpreterTemplate, EnvVars: map[string]string{"A": "b"}})
		if sb.ID != ci[0].SandboxID || sb.ContainerID != ci[0].ID || sb.AgentSecret != ci[0].AgentSecret {
			t.Errorf("sandbox %s on %s, want the oldest pooled %s on %s", sb.ID, sb.ContainerID, ci[0].SandboxID, ci[0].ID)
		}
		if init, ok := e.agent.Inited(sb.AgentAddr); !ok || init.EnvVars["A"] != "b" {
			t.Errorf("claimed container's agent init: %+v, %v", init, ok)
		}
		if got := e.poolEvent(t, sb.ID); got != "true" {
			t.Errorf(`"sandbox created" event: pool=%q, want "true"`, got)
		}
		if got := e.state(t, sb.ID); got.State != sandbox.StateRunning || !slices.Equal(got.AgentArgs, ciArgs) || got.TemplateID != CodeInterpreterTemplate {
			t.Errorf("stored: state %s, args %q, template %s", got.State, got.AgentArgs, got.TemplateID)
		}
		// The base template claims its own kind.
		b := e.create(t, CreateRequest{Template: BaseTemplate})
		if b.ContainerID != base[0].ID {
			t.Errorf("base sandbox on %s, want pooled base %s", b.ContainerID, base[0].ID)
		}
		// The same image without the agent's arguments is another
		// sandbox: it must not get a code interpreter's container.
		plain := e.create(t, CreateRequest{Template: ciImage})
		if slices.ContainsFunc(ci, func(c sandbox.Container) bool { return c.ID == plain.ContainerID }) {
			t.Errorf("sandbox of image %s (no agent arguments) claimed a code-interpreter container", ciImage)
		}
		if got := e.poolEvent(t, plain.ID); got != "" {
			t.Errorf("cold sandbox's event: pool=%q", got)
		}

		synctest.Wait() // the refill
		if diff := cmp.Diff(map[string]int{BaseTemplate: 1, CodeInterpreterTemplate: 2}, e.m.ServerStats(context.Background()).PoolReady); diff != "" {
			t.Errorf("PoolReady after the refill (-want +got):\n%s", diff)
		}
		if got := len(e.pooledOf(t, ciArgs)); got != 2 {
			t.Errorf("code-interpreter containers after the refill = %d, want 2", got)
		}
	})
}

// Only the code-interpreter pool: base creates start cold, and
// code-interpreter ones claim.
func TestPoolCodeInterpreterOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newCIEnv(t, withPools(0, 1))
		synctest.Wait()
		if got := len(e.pooledContainers(t)); got != 1 {
			t.Fatalf("pooled containers = %d, want 1", got)
		}
		b := e.create(t, CreateRequest{Template: BaseTemplate})
		if !slices.Contains(e.rt.Calls(), "Create "+b.ID) {
			t.Error("base sandbox not created cold")
		}
		ci := e.create(t, CreateRequest{Template: CodeInterpreterTemplate})
		if e.poolEvent(t, ci.ID) != "true" {
			t.Error("code-interpreter sandbox not from the pool")
		}
	})
}

// The claim paths that fall back to a cold create hold for the
// code-interpreter kind too, and the cold sandbox keeps its agent
// arguments.
func TestPoolCodeInterpreterFallbacks(t *testing.T) {
	tests := []struct {
		name    string
		breakIt func(e *env, pooled sandbox.Container)
	}{
		{"limits refused", func(e *env, _ sandbox.Container) {
			e.m.cfg.MemoryMB = 2048
			e.rt.Fail("Update", errors.New("engine says no"))
		}},
		{"agent dead", func(e *env, pooled sandbox.Container) { e.agent.Silence(pooled.AgentAddr) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newCIEnv(t, withPools(0, 1))
				synctest.Wait()
				pooled := e.pooledOf(t, ciArgs)[0]
				tt.breakIt(e, pooled)
				sb := e.create(t, CreateRequest{Template: CodeInterpreterTemplate})
				if sb.ContainerID == pooled.ID {
					t.Fatal("sandbox kept the failed pooled container")
				}
				if _, ok := e.container(t, pooled.ID); ok {
					t.Error("failed pooled container not removed")
				}
				if args, _ := e.rt.AgentArgsOf(sb.ContainerID); !slices.Equal(args, ciArgs) {
					t.Errorf("cold sandbox's agent arguments = %q, want %q", args, ciArgs)
				}
				if got := e.state(t, sb.ID).State; got != sandbox.StateRunning {
					t.Errorf("state = %s", got)
				}
			})
		})
	}
}

func TestPoolCodeInterpreterImageRebuilt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newCIEnv(t, withPools(1, 1))
		synctest.Wait()
		oldCI, base := e.pooledOf(t, ciArgs), e.pooledOf(t, nil)
		e.rt.Rebuild(ciImage)
		sb := e.create(t, CreateRequest{Template: CodeInterpreterTemplate})
		if sb.ContainerID == oldCI[0].ID {
			t.Fatal("sandbox claimed a container of the old image")
		}
		synctest.Wait() // the miss woke the refill
		newID, _ := e.rt.ImageID(context.Background(), ciImage)
		got := e.pooledOf(t, ciArgs)
		if len(got) != 1 || got[0].ImageID != newID {
			t.Fatalf("code-interpreter pool = %+v, want one container of %s", got, newID)
		}
		if _, ok := e.container(t, oldCI[0].ID); ok {
			t.Error("old-image container kept")
		}
		if now := e.pooledOf(t, nil); len(now) != 1 || now[0].ID != base[0].ID {
			t.Errorf("the base pool changed: %+v, was %+v", now, base)
		}
		// Rebuilt behind the pool's back with no claim: the periodic
		// check replaces it.
		e.rt.Rebuild(ciImage)
		newID, _ = e.rt.ImageID(context.Background(), ciImage)
		advance(warmpool.Recheck)
		if got := e.pooledOf(t, ciArgs); len(got) != 1 || got[0].ImageID != newID {
			t.Errorf("after a rebuild and %v: %+v, want one container of %s", warmpool.Recheck, got, newID)
		}
	})
}

// With one image for both templates (--code-interpreter-image=warren/base),
// each template claims containers of its own agent arguments, and after a
// restart the pooled containers' kind cannot be told, so they are replaced.
func TestPoolOneImageForBothKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		same := func(c *config) { c.WarmPool, c.WarmPoolCodeInterpreter, c.CodeInterpreterImage = 1, 1, "warren/base" }
		e := newEnv(t, same)
		synctest.Wait()
		base, ci := e.pooledOf(t, nil), e.pooledOf(t, ciArgs)
		if len(base) != 1 || len(ci) != 1 {
			t.Fatalf("pool: %d base, %d code-interpreter; want 1 and 1", len(base), len(ci))
		}
		// The base container is the older: a claim by image alone would
		// hand it to the code interpreter.
		if sb := e.create(t, CreateRequest{Template: CodeInterpreterTemplate}); sb.ContainerID != ci[0].ID {
			t.Errorf("code-interpreter sandbox on %s, want %s", sb.ContainerID, ci[0].ID)
		}
		if sb := e.create(t, CreateRequest{Template: BaseTemplate}); sb.ContainerID != base[0].ID {
			t.Errorf("base sandbox on %s, want %s", sb.ContainerID, base[0].ID)
		}
		synctest.Wait()
		old := e.pooledContainers(t)
		e.stop()
		e.start(t, same)
		for _, c := range old {
			if _, ok := e.container(t, c.ID); ok {
				t.Errorf("pooled container %s of unknown kind adopted", c.ID)
			}
		}
		synctest.Wait()
		if base, ci := len(e.pooledOf(t, nil)), len(e.pooledOf(t, ciArgs)); base != 1 || ci != 1 {
			t.Errorf("pool after the restart: %d base, %d code-interpreter; want 1 and 1", base, ci)
		}
	})
}

func TestPoolCodeInterpreterReconcileOnRestart(t *testing.T) {
	tests := []struct {
		name     string
		base, ci int // pool sizes after the restart
		rebuild  string
		wantBase int // adopted
		wantCI   int
	}{
		{name: "adopts both", base: 1, ci: 1, wantBase: 1, wantCI: 1},
		{name: "code interpreter disabled", base: 1, ci: 0, wantBase: 1, wantCI: 0},
		{name: "base disabled", base: 0, ci: 1, wantBase: 0, wantCI: 1},
		{name: "code-interpreter image rebuilt", base: 1, ci: 1, rebuild: ciImage, wantBase: 1, wantCI: 0},
		{name: "base image rebuilt", base: 1, ci: 1, rebuild: "warren/base", wantBase: 0, wantCI: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newCIEnv(t, withPools(1, 1))
				synctest.Wait()
				live := e.create(t, CreateRequest{Template: CodeInterpreterTemplate}) // Close keeps the pool
				synctest.Wait()
				base, ci := e.pooledOf(t, nil), e.pooledOf(t, ciArgs)
				if len(base) != 1 || len(ci) != 1 {
					t.Fatalf("pool before the restart: %d base, %d code-interpreter", len(base), len(ci))
				}
				e.stop()
				if tt.rebuild != "" {
					e.rt.Rebuild(tt.rebuild)
				}
				before := e.creates()
				e.start(t, withPools(tt.base, tt.ci))
				kept := func(c sandbox.Container) int {
					if _, ok := e.container(t, c.ID); ok {
						return 1
					}
					return 0
				}
				if got := []int{kept(base[0]), kept(ci[0])}; !slices.Equal(got, []int{tt.wantBase, tt.wantCI}) {
					t.Errorf("adopted (base, code interpreter) = %v, want [%d %d]", got, tt.wantBase, tt.wantCI)
				}
				synctest.Wait()
				want := map[string]int{BaseTemplate: tt.base, CodeInterpreterTemplate: tt.ci}
				if diff := cmp.Diff(want, e.m.ServerStats(context.Background()).PoolReady); diff != "" {
					t.Errorf("PoolReady after the refill (-want +got):\n%s", diff)
				}
				if got, want := e.creates()-before, tt.base+tt.ci-tt.wantBase-tt.wantCI; got != want {
					t.Errorf("%d containers made after the restart, want %d", got, want)
				}
				if got := e.state(t, live.ID).State; got != sandbox.StateRunning {
					t.Errorf("live sandbox: %s", got)
				}
				if tt.wantCI == 0 {
					return
				}
				// An adopted code-interpreter container is claimed by its
				// template, never by base's, and gets its limits set.
				if tt.base > 0 {
					b := e.create(t, CreateRequest{Template: BaseTemplate})
					if b.ContainerID == ci[0].ID {
						t.Fatal("base sandbox claimed the adopted code-interpreter container")
					}
				}
				sb := e.create(t, CreateRequest{Template: CodeInterpreterTemplate})
				if sb.ContainerID != ci[0].ID || sb.ID != ci[0].SandboxID || sb.AgentSecret != ci[0].AgentSecret {
					t.Errorf("claimed %s (%s), want adopted %s (%s)", sb.ContainerID, sb.ID, ci[0].ID, ci[0].SandboxID)
				}
				if !slices.Contains(e.rt.Calls(), "Update "+sb.ContainerID) {
					t.Error("adopted container's limits not set")
				}
			})
		})
	}
}
