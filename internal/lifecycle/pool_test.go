package lifecycle

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

func withPool(n int) func(*config) { return func(c *config) { c.WarmPool = n } }

// pooledContainers returns the containers labelled as the pool's that no
// sandbox in the store owns, sorted by ID.
func (e *env) pooledContainers(t *testing.T) []sandbox.Container {
	t.Helper()
	var out []sandbox.Container
	for _, c := range e.rt.Containers() {
		if c.Labels[sandbox.LabelPool] != "true" {
			continue
		}
		if sb, err := e.store.GetSandbox(context.Background(), c.SandboxID); err == nil && sb.ContainerID == c.ID {
			continue
		}
		out = append(out, c)
	}
	return out
}

// creates counts the runtime's Create calls.
func (e *env) creates() int {
	n := 0
	for _, c := range e.rt.Calls() {
		if strings.HasPrefix(c, "Create ") {
			n++
		}
	}
	return n
}

func TestPoolClaimAndRefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withPool(2))
		synctest.Wait()
		pool := e.pooledContainers(t)
		if len(pool) != 2 || e.m.WarmPoolReady() != 2 {
			t.Fatalf("pool after start: %d containers, %d ready; want 2", len(pool), e.m.WarmPoolReady())
		}
		sb := e.create(t, CreateRequest{Template: "base", Secure: true,
			EnvVars: map[string]string{"FOO": "bar"}})
		made := 0 // the pool made the container for this ID; the claim must not
		for _, c := range e.rt.Calls() {
			if c == "Create "+sb.ID {
				made++
			}
		}
		if made != 1 {
			t.Errorf("containers made for %s = %d, want 1", sb.ID, made)
		}
		// The oldest pooled container became the sandbox, with its ID.
		if sb.ID != pool[0].SandboxID || sb.ContainerID != pool[0].ID || sb.AgentAddr != pool[0].AgentAddr {
			t.Errorf("sandbox %s on %s (%s), want %s on %s (%s)", sb.ID, sb.ContainerID, sb.AgentAddr,
				pool[0].SandboxID, pool[0].ID, pool[0].AgentAddr)
		}
		if sb.AgentSecret != pool[0].AgentSecret {
			t.Error("sandbox's agent secret is not its container's")
		}
		init, ok := e.agent.Inited(sb.AgentAddr)
		// Answered: the pool waited for the agent's first answer, so the
		// claim's init is one request.
		want := sandbox.AgentInit{AgentSecret: sb.AgentSecret, EnvVars: map[string]string{"FOO": "bar"}, AccessToken: sb.EnvdAccessToken, DefaultUser: "user", Answered: true}
		if !ok || sb.EnvdAccessToken == "" {
			t.Fatalf("agent of the claimed container not initialised (token %q)", sb.EnvdAccessToken)
		}
		if diff := cmp.Diff(want, init); diff != "" {
			t.Errorf("agent init (-want +got):\n%s", diff)
		}
		if got := e.state(t, sb.ID); got.State != sandbox.StateRunning || got.ContainerID != sb.ContainerID || got.TeamID != team {
			t.Errorf("stored: state %s container %s team %s", got.State, got.ContainerID, got.TeamID)
		}

		synctest.Wait() // the refill
		if got := e.pooledContainers(t); len(got) != 2 || e.m.WarmPoolReady() != 2 {
			t.Errorf("pool after a claim: %d containers, %d ready; want 2", len(got), e.m.WarmPoolReady())
		}
		// A periodic reconcile leaves the pool and the sandbox alone.
		if err := e.m.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := len(e.rt.Containers()); got != 3 {
			t.Errorf("containers after reconcile = %d, want 3", got)
		}
		// The claimed sandbox lives like any other.
		if err := e.m.Kill(context.Background(), team, sb.ID); err != nil {
			t.Fatal(err)
		}
		if _, ok := e.container(t, sb.ContainerID); ok {
			t.Error("killed sandbox's container survives")
		}
	})
}

func TestPoolDrainedFallsBackToCold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withPool(1))
		synctest.Wait()
		a := e.create(t, CreateRequest{Template: "base"})
		b := e.create(t, CreateRequest{Template: "base"}) // before the refill ran
		if a.ID == b.ID || a.ContainerID == b.ContainerID {
			t.Fatalf("two sandboxes share %s / %s", a.ID, a.ContainerID)
		}
		c := e.create(t, CreateRequest{Template: "python:3.12"}) // other images never claim
		if lbl := e.containerLabels(t, c.ContainerID); lbl[sandbox.LabelPool] != "" {
			t.Errorf("python sandbox runs in a pooled container")
		}
		synctest.Wait()
		if got := e.m.WarmPoolReady(); got != 1 {
			t.Errorf("pool = %d, want 1", got)
		}
		// Each create's steps are counted under the path it took: the
		// python one cold, the others (a refill may have run between them)
		// one or two claims.
		counts := map[string]uint64{}
		for _, s := range e.m.ServerStats(context.Background()).CreatePhases {
			counts[s.Path+" "+s.Step] = s.Count
		}
		pool, cold := counts["pool total"], counts["cold total"]
		if pool+cold != 3 || pool < 1 || cold < 1 {
			t.Fatalf("creates counted: %d claims, %d cold; want 3 in all, one of each at least (all: %v)", pool, cold, counts)
		}
		for _, k := range []string{"image_id", "save", "limits", "agent", "save_running"} {
			if counts["pool "+k] != pool {
				t.Errorf("claims counted in %q = %d, want %d (all: %v)", k, counts["pool "+k], pool, counts)
			}
		}
		for _, k := range []string{"resolve", "pool_miss", "gate", "save", "engine", "agent", "save_running"} {
			if counts["cold "+k] != cold {
				t.Errorf("cold creates counted in %q = %d, want %d (all: %v)", k, counts["cold "+k], cold, counts)
			}
		}
	})
}

func (e *env) containerLabels(t *testing.T, id string) map[string]string {
	t.Helper()
	c, ok := e.container(t, id)
	if !ok {
		t.Fatalf("container %s missing", id)
	}
	return c.Labels
}

func TestPoolLimitsUpdated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withPool(1))
		synctest.Wait()
		same := e.create(t, CreateRequest{Template: "base"})
		if slices.ContainsFunc(e.rt.Calls(), func(c string) bool { return strings.HasPrefix(c, "Update ") }) {
			t.Error("limits updated although the pooled container had them")
		}
		synctest.Wait()
		// A sandbox asking for other limits than the pool was made with
		// (as a template's resource defaults do) gets them live.
		e.m.cfg.MemoryMB, e.m.cfg.CPUCount = 1024, 1
		other := e.create(t, CreateRequest{Template: "base"})
		if other.ContainerID == same.ContainerID || e.containerLabels(t, other.ContainerID)[sandbox.LabelPool] != "true" {
			t.Fatal("second sandbox did not come from the pool")
		}
		got, _ := e.rt.LimitsOf(other.ContainerID)
		if want := (fake.Limits{CPUCount: 1, MemoryMB: 1024, PidsLimit: 1024}); got != want {
			t.Errorf("limits = %+v, want %+v", got, want)
		}
	})
}

func TestPoolClaimFailureFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withPool(1))
		synctest.Wait()
		pooled := e.pooledContainers(t)[0]
		e.m.cfg.MemoryMB = 2048 // forces an Update, which fails
		e.rt.Fail("Update", errors.New("engine says no"))
		sb := e.create(t, CreateRequest{Template: "base"})
		if sb.ContainerID == pooled.ID || sb.ID == pooled.SandboxID {
			t.Errorf("sandbox kept the failed pooled container")
		}
		if _, ok := e.container(t, pooled.ID); ok {
			t.Error("failed pooled container not removed")
		}
		if _, err := e.store.GetSandbox(context.Background(), pooled.SandboxID); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Errorf("record of the failed claim kept: %v", err)
		}
		if got := e.state(t, sb.ID).State; got != sandbox.StateRunning {
			t.Errorf("state = %s", got)
		}
	})
}

// A pooled container that died since it was pooled (an engine restart
// stops them all) costs a create a short wait, not the whole InitTimeout.
func TestPoolDeadContainerFallsBackQuickly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withPool(1))
		synctest.Wait()
		pooled := e.pooledContainers(t)[0]
		e.agent.Silence(pooled.AgentAddr)
		start := time.Now()
		sb := e.create(t, CreateRequest{Template: "base"})
		if took := time.Since(start); took > pooledInitTimeout+time.Second {
			t.Errorf("create took %v; want about %v", took, pooledInitTimeout)
		}
		if sb.ContainerID == pooled.ID {
			t.Error("sandbox got the dead pooled container")
		}
		if got := e.state(t, sb.ID).State; got != sandbox.StateRunning {
			t.Errorf("state = %s", got)
		}
	})
}

// A pooled container's agent takes the server's CA when it is pooled, so
// that a claim's init does not install it; a cold create's init does.
func TestPoolInstallsTheCABeforeAClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ca = "-----BEGIN CERTIFICATE-----\nwarren\n-----END CERTIFICATE-----\n"
		e := newEnv(t, func(c *config) { withPool(1)(c); c.CABundle = ca })
		synctest.Wait()
		sb := e.create(t, CreateRequest{Template: "base", EnvVars: map[string]string{"A": "b"}})
		inits := e.agent.Inits(sb.AgentAddr)
		if len(inits) != 2 {
			t.Fatalf("the claimed container's agent had %d inits, want 2 (the pool's, the claim's): %+v", len(inits), inits)
		}
		if want := (sandbox.AgentInit{AgentSecret: sb.AgentSecret, CABundle: ca, Answered: true}); !cmp.Equal(inits[0], want) {
			t.Errorf("the pool's init = %+v, want %+v", inits[0], want)
		}
		if inits[1].CABundle != "" || inits[1].EnvVars["A"] != "b" || !inits[1].Answered {
			t.Errorf("the claim's init = %+v, want the sandbox's settings without the CA", inits[1])
		}
		cold := e.create(t, CreateRequest{Template: "python:3.12"}) // no pool
		if cold.ContainerID == "" || e.containerLabels(t, cold.ContainerID)[sandbox.LabelPool] != "" {
			t.Fatal("the python sandbox is not a cold create")
		}
		if inits := e.agent.Inits(cold.AgentAddr); len(inits) != 1 || inits[0].CABundle != ca || inits[0].Answered {
			t.Errorf("a cold create's inits = %+v, want one with the CA", inits)
		}
	})
}

func TestPoolDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil) // testSettings keep no pool
		synctest.Wait()
		if got := len(e.rt.Containers()); got != 0 {
			t.Fatalf("%d containers before any create", got)
		}
		sb := e.create(t, CreateRequest{Template: "base"})
		advance(time.Minute)
		if got := len(e.rt.Containers()); got != 1 || e.m.WarmPoolReady() != 0 {
			t.Errorf("%d containers, pool %d; want only the sandbox's", got, e.m.WarmPoolReady())
		}
		if !slices.Contains(e.rt.Calls(), "Create "+sb.ID) {
			t.Error("sandbox not created cold")
		}
	})
}

func TestPoolReconcileOnRestart(t *testing.T) {
	tests := []struct {
		name      string
		pool      int
		rebuild   bool
		wantAdopt int
	}{
		{"adopts", 2, false, 2},
		{"smaller pool", 1, false, 1},
		{"disabled", 0, false, 0},
		{"image rebuilt", 2, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, withPool(2))
				synctest.Wait()
				sb := e.create(t, CreateRequest{Template: "base"})
				synctest.Wait()
				kept := e.pooledContainers(t)
				e.stop()
				for _, c := range kept {
					if _, ok := e.container(t, c.ID); !ok {
						t.Fatalf("pool container %s removed by Close; want it kept for the next start", c.ID)
					}
				}
				// Behind Warren's back: a pooled container stopped, and one
				// of a sandbox long gone lingers.
				e.rt.Put(sandbox.Container{ID: "stopped-pool", SandboxID: "istoppedpool", Labels: poolLabels("istoppedpool")})
				e.rt.Put(sandbox.Container{ID: "old-claim", SandboxID: sb.ID, Running: true, AgentAddr: "127.0.0.1:2", Labels: poolLabels(sb.ID)})
				if tt.rebuild {
					e.rt.Rebuild("warren/base")
				}
				before := e.creates()
				e.start(t, withPool(tt.pool))

				for _, id := range []string{"stopped-pool", "old-claim"} {
					if _, ok := e.container(t, id); ok {
						t.Errorf("container %s kept", id)
					}
				}
				if got := e.state(t, sb.ID); got.State != sandbox.StateRunning {
					t.Errorf("claimed sandbox: state %s", got.State)
				}
				if _, ok := e.container(t, sb.ContainerID); !ok {
					t.Error("claimed sandbox's container removed")
				}
				adopted := 0
				for _, c := range kept {
					if _, ok := e.container(t, c.ID); ok {
						adopted++
					}
				}
				if adopted != tt.wantAdopt {
					t.Errorf("adopted %d, want %d", adopted, tt.wantAdopt)
				}
				synctest.Wait()
				if got := e.m.WarmPoolReady(); got != tt.pool {
					t.Errorf("pool after refill = %d, want %d", got, tt.pool)
				}
				if got := e.creates() - before; got != tt.pool-tt.wantAdopt {
					t.Errorf("%d containers made after restart, want %d", got, tt.pool-tt.wantAdopt)
				}
				if tt.wantAdopt == 0 {
					return
				}
				// An adopted container is claimed like a fresh one; its
				// limits are unknown, so they are set.
				next := e.create(t, CreateRequest{Template: "base"})
				if next.ContainerID != kept[0].ID || next.ID != kept[0].SandboxID {
					t.Errorf("claimed %s (%s), want adopted %s (%s)", next.ContainerID, next.ID, kept[0].ID, kept[0].SandboxID)
				}
				if next.AgentSecret != kept[0].AgentSecret {
					t.Error("adopted container's agent secret lost")
				}
				if !slices.Contains(e.rt.Calls(), "Update "+next.ContainerID) {
					t.Error("adopted container's limits not set")
				}
				// Nothing says its agent answers now: the init waits for it.
				if init, _ := e.agent.Inited(next.AgentAddr); init.Answered {
					t.Error("adopted container's agent taken as answering")
				}
			})
		})
	}
}

func poolLabels(id string) map[string]string {
	return map[string]string{sandbox.LabelManaged: "true", sandbox.LabelSandbox: id, sandbox.LabelPool: "true"}
}

func TestPoolHalfClaimedOnRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withPool(1))
		synctest.Wait()
		c := e.pooledContainers(t)[0]
		e.stop()
		// The server died between saving a claim and finishing it: the
		// container may hold a client's env vars, so it is not reused.
		st, err := sqlite.Open(context.Background(), filepath.Join(e.dir, "warren.db"))
		if err != nil {
			t.Fatal(err)
		}
		halfMade := sandbox.Sandbox{ID: c.SandboxID, TeamID: team, ContainerID: c.ID, State: sandbox.StateCreating}
		if err := st.PutSandbox(context.Background(), halfMade); err != nil {
			t.Fatal(err)
		}
		st.Close()
		e.start(t, withPool(1))
		if _, ok := e.container(t, c.ID); ok {
			t.Error("half-claimed container kept")
		}
		if _, err := e.store.GetSandbox(context.Background(), c.SandboxID); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Errorf("half-claimed record kept: %v", err)
		}
	})
}

// TestPoolClaimAppliesEgress: a pooled container has the default
// network's rules before it is claimed (so a claim asking for it writes
// nothing), a claim gets its own, and a pooled container that goes takes
// its rules with it.
func TestPoolClaimAppliesEgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fw := &fakeFirewall{rules: map[string]sandbox.Network{}}
		e := newEnv(t, func(c *config) { c.WarmPool, c.Firewall = 1, fw })
		synctest.Wait()
		pooled := e.pooledContainers(t)
		if len(pooled) != 1 {
			t.Fatalf("pooled containers = %d, want 1", len(pooled))
		}
		first := pooled[0].SandboxID
		if got, _, ok := fw.rule(first); !ok || !got.AllowInternetAccess {
			t.Errorf("pooled container's rules before its claim = %+v (%v), want the default network's", got, ok)
		}
		deny := sandbox.Network{AllowPublicTraffic: true, DenyOut: []string{"10.0.0.0/8"}}
		sb := e.create(t, CreateRequest{Template: "base", Network: deny})
		if sb.ID != first {
			t.Fatalf("claimed sandbox %s, want the pooled %s", sb.ID, first)
		}
		got, gotTeam, _ := fw.rule(sb.ID)
		if diff := cmp.Diff(deny, got); diff != "" {
			t.Errorf("claimed sandbox's rules (-want +got):\n%s", diff)
		}
		if gotTeam != team {
			t.Errorf("claimed sandbox's rules are for team %q, want %q", gotTeam, team)
		}
		synctest.Wait()
		refilled := e.pooledContainers(t)
		if len(refilled) != 1 {
			t.Fatalf("pooled containers after the refill = %d, want 1", len(refilled))
		}
		next := refilled[0]
		if _, _, ok := fw.rule(next.SandboxID); !ok {
			t.Error("the refill's container has no rules")
		}
		if err := e.rt.Remove(context.Background(), next.ID); err != nil {
			t.Fatal(err)
		}
		if err := e.m.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := fw.rule(next.SandboxID); ok {
			t.Error("a pooled container that vanished left its rules")
		}
	})
}

// A server stopped with no sandbox leaves no warm pool container behind.
func TestPoolRemovedOnCloseWithoutSandboxes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withPool(2))
		synctest.Wait()
		if got := len(e.pooledContainers(t)); got != 2 {
			t.Fatalf("pooled containers = %d, want 2", got)
		}
		e.stop()
		if got := e.pooledContainers(t); len(got) != 0 {
			t.Errorf("pooled containers left after Close: %v", got)
		}
	})
}

// A pool container the pool never knew (made after the last reconcile by
// the server this one replaced, still stopping) goes at Close too.
func TestPoolContainersMadeByAnotherRemovedOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withPool(1))
		synctest.Wait()
		if _, err := e.rt.Create(context.Background(), sandbox.ContainerSpec{SandboxID: sandbox.NewID(), Image: "warren/base",
			Labels: map[string]string{sandbox.LabelPool: "true"}}); err != nil {
			t.Fatal(err)
		}
		if got := len(e.pooledContainers(t)); got != 2 {
			t.Fatalf("pooled containers = %d, want 2", got)
		}
		e.stop()
		if got := e.pooledContainers(t); len(got) != 0 {
			t.Errorf("pooled containers left after Close: %v", got)
		}
	})
}
