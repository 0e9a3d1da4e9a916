package lifecycle

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/warmpool"
)

// withAutoPool sizes the base pool from demand, budget MiB beyond floors.
func withAutoPool(budgetMB int) func(*config) {
	return func(c *config) { c.WarmPool, c.WarmPoolMemoryMB = WarmPoolAuto, budgetMB }
}

// burst creates n sandboxes of template at once and returns them.
func (e *env) burst(t *testing.T, n int, template string) []sandbox.Sandbox {
	t.Helper()
	var mu sync.Mutex
	var out []sandbox.Sandbox
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			sb, err := e.m.Create(context.Background(), CreateRequest{TeamID: team, Template: template, Timeout: time.Hour})
			if err != nil {
				t.Errorf("create: %v", err)
				return
			}
			mu.Lock()
			out = append(out, sb)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// pooledImage returns the IDs of the pool's containers that run image.
func (e *env) pooledImage(t *testing.T, image string) map[string]bool {
	t.Helper()
	id, _ := e.rt.ImageIDOf(image)
	out := map[string]bool{}
	for _, c := range e.pooledContainers(t) {
		if c.ImageID == id {
			out[c.ID] = true
		}
	}
	return out
}

// allClaimed reports whether every sandbox runs in one of pooled.
func allClaimed(sbs []sandbox.Sandbox, pooled map[string]bool) bool {
	for _, sb := range sbs {
		if !pooled[sb.ContainerID] {
			return false
		}
	}
	return true
}

func TestPoolGrowsForBurstsAndDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withAutoPool(1024))
		synctest.Wait()
		if got := e.m.WarmPoolReady(); got != DefaultWarmPool {
			t.Fatalf("pool before any create = %d, want the floor %d", got, DefaultWarmPool)
		}
		e.burst(t, 8, "base") // larger than the pool: most start cold
		synctest.Wait()
		if got := e.m.ServerStats(context.Background()).PoolSize[BaseTemplate]; got != 8 {
			t.Errorf("pool size after a burst of 8 = %d, want 8", got)
		}
		ready := e.pooledImage(t, "warren/base")
		if len(ready) != 8 {
			t.Fatalf("pool holds %d after a burst of 8, want 8", len(ready))
		}
		advance(10 * time.Second)
		if sbs := e.burst(t, 8, "base"); !allClaimed(sbs, ready) {
			t.Error("the second burst of 8 did not all claim from the pool")
		}
		synctest.Wait()
		if got := e.m.WarmPoolReady(); got != 8 {
			t.Errorf("pool after the second burst = %d, want refilled to 8", got)
		}
		advance(warmpool.Window + warmpool.Recheck)
		if got := e.m.WarmPoolReady(); got != DefaultWarmPool {
			t.Errorf("pool %s after demand stopped = %d, want drained to %d", warmpool.Window+warmpool.Recheck, got, DefaultWarmPool)
		}
	})
}

func TestPoolPinnedSizeIgnoresDemand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withPool(2))
		synctest.Wait()
		e.burst(t, 6, "base")
		synctest.Wait()
		if got := e.m.WarmPoolReady(); got != 2 {
			t.Errorf("pinned pool of 2 after a burst of 6 = %d", got)
		}
	})
}

// burstBeyondBudget starts a server whose budget has room for room base
// containers beyond the floor, makes a burst of n > room base sandboxes
// and checks that the pool grew to the floor and room.
func burstBeyondBudget(t *testing.T, room, n int) *env {
	t.Helper()
	e := newEnv(t, withAutoPool(room*warmpool.ContainerMB))
	synctest.Wait()
	e.burst(t, n, "base")
	synctest.Wait()
	if got := len(e.pooledImage(t, "warren/base")); got != DefaultWarmPool+room {
		t.Fatalf("base pool after a burst of %d within a budget of %d = %d, want %d", n, room, got, DefaultWarmPool+room)
	}
	return e
}

func TestPoolMemoryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := burstBeyondBudget(t, 3, 8)
		st := e.m.ServerStats(context.Background())
		if got, want := st.PoolMemoryMB[BaseTemplate], 3*warmpool.ContainerMB; got != want || st.PoolBudgetMB != want {
			t.Errorf("pool memory = %d MiB of a budget of %d, want %d of %d", got, st.PoolBudgetMB, want, want)
		}
	})
}

func TestPoolLearnsEveryTemplate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withAutoPool(1024))
		synctest.Wait()
		if got := len(e.pooledImage(t, "python:3.12")); got != 0 {
			t.Fatalf("%d pooled containers of a template never used", got)
		}
		e.burst(t, 3, "python:3.12")
		synctest.Wait()
		ready := e.pooledImage(t, "python:3.12")
		if len(ready) != 3 {
			t.Fatalf("pool of python:3.12 after 3 creates = %d, want 3", len(ready))
		}
		advance(10 * time.Second)
		sbs := e.burst(t, 3, "python:3.12")
		if !allClaimed(sbs, ready) {
			t.Error("creates of a used template did not claim from its pool")
		}
		for _, sb := range sbs {
			if sb.TemplateID != "python:3.12" {
				t.Errorf("claimed sandbox is of template %s", sb.TemplateID)
			}
		}
		advance(warmpool.Window + warmpool.Recheck)
		if got := len(e.pooledImage(t, "python:3.12")); got != 0 {
			t.Errorf("pool of python:3.12 after its demand stopped = %d, want 0", got)
		}
		if got := e.m.WarmPoolReady(); got != DefaultWarmPool {
			t.Errorf("pool after demand stopped = %d, want base's floor %d", got, DefaultWarmPool)
		}
	})
}

func TestReleasePoolLetsGoOfAnImage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withAutoPool(1024))
		synctest.Wait()
		e.burst(t, 3, "python:3.12")
		synctest.Wait()
		if got := len(e.pooledImage(t, "python:3.12")); got != 3 {
			t.Fatalf("pool of python:3.12 after 3 creates = %d, want 3", got)
		}
		e.m.ReleasePool(context.Background(), "python:3.12")
		if got := len(e.pooledImage(t, "python:3.12")); got != 0 {
			t.Errorf("pooled containers of a released image = %d, want 0", got)
		}
		e.m.ReleasePool(context.Background(), "warren/base")
		e.create(t, CreateRequest{Template: "base"}) // wakes the refill
		synctest.Wait()
		if got := len(e.pooledImage(t, "python:3.12")); got != 0 {
			t.Errorf("a refill made %d containers of the released image again", got)
		}
		if got := len(e.pooledImage(t, "warren/base")); got != DefaultWarmPool {
			t.Errorf("base pool after a release of its image = %d, want %d: built-in pools stay", got, DefaultWarmPool)
		}
	})
}

func TestPoolLearnedSizeSurvivesRebuild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withAutoPool(1024))
		synctest.Wait()
		e.burst(t, 6, "base")
		synctest.Wait()
		advance(10 * time.Second)
		e.rt.Rebuild("warren/base")
		e.create(t, CreateRequest{Template: "base"}) // a miss: wakes the refill
		synctest.Wait()
		if got := len(e.pooledImage(t, "warren/base")); got != 6 {
			t.Errorf("pool of the rebuilt image = %d, want the learned 6", got)
		}
		if got := e.m.WarmPoolReady(); got != 6 {
			t.Errorf("pool = %d, want 6, none of the old image", got)
		}
	})
}

// A burst of base that would fill the budget alone leaves room for the
// pool of a template created now and then.
func TestPoolBudgetSharedWithOtherTemplates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := burstBeyondBudget(t, 8, 20)
		e.create(t, CreateRequest{Template: "python:3.12"}) // cold: makes its demand known
		synctest.Wait()
		if got := len(e.pooledImage(t, "python:3.12")); got != 1 {
			t.Fatalf("pool of python:3.12 beside base's = %d, want 1", got)
		}
		if got := len(e.pooledImage(t, "warren/base")); got != DefaultWarmPool+7 {
			t.Errorf("base pool = %d, want %d: one of its containers gave way", got, DefaultWarmPool+7)
		}
		ready := e.pooledImage(t, "python:3.12")
		advance(2 * time.Second)
		if sb := e.create(t, CreateRequest{Template: "python:3.12"}); !ready[sb.ContainerID] {
			t.Error("the second create of python:3.12 did not claim from its pool")
		}
	})
}

// A template's first create, whose share of the memory budget comes out
// of another template's pool, does not share the engine with that pool's
// removal: the refill holds it until the create is made.
func TestPoolBudgetGivesWayAfterTheCreate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, agent := newGatedEnv(t, withAutoPool(8*warmpool.ContainerMB))
		synctest.Wait()
		e.burst(t, 20, "base")
		synctest.Wait()
		base := len(e.pooledImage(t, "warren/base"))
		release := agent.hold()
		created := e.createInBackground("python:3.12")
		time.Sleep(warmpool.ClaimHold / 2)
		synctest.Wait()
		if got := len(e.pooledImage(t, "warren/base")); got != base {
			t.Errorf("base pool while the create is made = %d, want %d: nothing removed yet", got, base)
		}
		release()
		if err := <-created; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := len(e.pooledImage(t, "warren/base")); got != base-1 {
			t.Errorf("base pool after the create = %d, want %d: one of its containers gave way", got, base-1)
		}
		if got := len(e.pooledImage(t, "python:3.12")); got != 1 {
			t.Errorf("pool of python:3.12 after its first create = %d, want 1", got)
		}
	})
}

// A learned pool's containers are made with its template's resources, so
// that a claim changes nothing on the engine.
func TestPoolLearnsTemplateResources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withMaxima(2, 1024, withAutoPool(1024), func(c *config) {
			c.Templates, c.CPUCount, c.MemoryMB = hugeTemplates{"python:3.12"}, 1, 512
		}))
		e.create(t, CreateRequest{Template: "huge"})
		synctest.Wait()
		ready := e.pooledImage(t, "python:3.12")
		if len(ready) != 1 {
			t.Fatalf("pool of the template after a create = %d, want 1", len(ready))
		}
		sb := e.create(t, CreateRequest{Template: "huge"})
		if !ready[sb.ContainerID] {
			t.Fatal("the second create did not claim from the template's pool")
		}
		if l, _ := e.rt.LimitsOf(sb.ContainerID); l.CPUCount != 2 || l.MemoryMB != 1024 {
			t.Errorf("claimed container's limits %+v, want the template's 2 CPUs, 1024 MiB", l)
		}
		if slices.Contains(e.rt.Calls(), "Update "+sb.ContainerID) {
			t.Error("the claim updated the container's limits")
		}
	})
}
