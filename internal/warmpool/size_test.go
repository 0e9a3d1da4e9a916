package warmpool

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// allClaimed reports whether every container claimed is one of pooled.
func allClaimed(claimed []string, pooled map[string]bool) bool {
	for _, id := range claimed {
		if !pooled[id] {
			return false
		}
	}
	return true
}

func TestPoolGrowsForBurstsAndDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, autoPool(1024), nil)
		synctest.Wait()
		if got := e.p.Ready(); got != baseFloor {
			t.Fatalf("pool before any create = %d, want the floor %d", got, baseFloor)
		}
		e.burst(t, 8, "base") // larger than the pool: most start cold
		synctest.Wait()
		if got := e.p.Stats().Size["base"]; got != 8 {
			t.Errorf("pool size after a burst of 8 = %d, want 8", got)
		}
		ready := e.pooledImage(baseImage)
		if len(ready) != 8 {
			t.Fatalf("pool holds %d after a burst of 8, want 8", len(ready))
		}
		advance(10 * time.Second)
		if claimed := e.burst(t, 8, "base"); len(claimed) != 8 || !allClaimed(claimed, ready) {
			t.Errorf("the second burst of 8 claimed %d from the pool, want all", len(claimed))
		}
		synctest.Wait()
		if got := e.p.Ready(); got != 8 {
			t.Errorf("pool after the second burst = %d, want refilled to 8", got)
		}
		advance(Window + Recheck)
		if got := e.p.Ready(); got != baseFloor {
			t.Errorf("pool %s after demand stopped = %d, want drained to %d", Window+Recheck, got, baseFloor)
		}
	})
}

func TestPoolPinnedSizeIgnoresDemand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, settings(2, 0), nil)
		synctest.Wait()
		e.burst(t, 6, "base")
		synctest.Wait()
		if got := e.p.Ready(); got != 2 {
			t.Errorf("pinned pool of 2 after a burst of 6 = %d", got)
		}
	})
}

// burstBeyondBudget starts a pool whose budget has room for room base
// containers beyond the floor, makes a burst of n > room base creates and
// checks that the pool grew to the floor and room.
func burstBeyondBudget(t *testing.T, room, n int) *env {
	t.Helper()
	e := newEnv(t, autoPool(room*ContainerMB), nil)
	synctest.Wait()
	e.burst(t, n, "base")
	synctest.Wait()
	if got := len(e.pooledImage(baseImage)); got != baseFloor+room {
		t.Fatalf("base pool after a burst of %d within a budget of %d = %d, want %d", n, room, got, baseFloor+room)
	}
	return e
}

func TestPoolMemoryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := burstBeyondBudget(t, 3, 8)
		st := e.p.Stats()
		if got, want := st.MemoryMB["base"], 3*ContainerMB; got != want || st.BudgetMB != want {
			t.Errorf("pool memory = %d MiB of a budget of %d, want %d of %d", got, st.BudgetMB, want, want)
		}
	})
}

func TestPoolLearnsEveryTemplate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, autoPool(1024), nil)
		synctest.Wait()
		if got := len(e.pooledImage("python:3.12")); got != 0 {
			t.Fatalf("%d pooled containers of a template never used", got)
		}
		e.burst(t, 3, "python:3.12")
		synctest.Wait()
		ready := e.pooledImage("python:3.12")
		if len(ready) != 3 {
			t.Fatalf("pool of python:3.12 after 3 creates = %d, want 3", len(ready))
		}
		advance(10 * time.Second)
		if claimed := e.burst(t, 3, "python:3.12"); len(claimed) != 3 || !allClaimed(claimed, ready) {
			t.Errorf("creates of a used template claimed %d from its pool, want 3", len(claimed))
		}
		// A learned pool serves its own template only, not another of its
		// image (as a built-in one does).
		sb := e.sandboxOf(t, "python:3.12")
		sb.TemplateID = "another"
		if kind, ok := e.p.KindOf(sb); ok {
			t.Errorf("another template of python:3.12 is served by the pool of %s", kind)
		}
		advance(Window + Recheck)
		if got := len(e.pooledImage("python:3.12")); got != 0 {
			t.Errorf("pool of python:3.12 after its demand stopped = %d, want 0", got)
		}
		if got := e.p.Ready(); got != baseFloor {
			t.Errorf("pool after demand stopped = %d, want base's floor %d", got, baseFloor)
		}
	})
}

func TestReleaseLetsGoOfAnImage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, autoPool(1024), nil)
		synctest.Wait()
		e.burst(t, 3, "python:3.12")
		synctest.Wait()
		if got := len(e.pooledImage("python:3.12")); got != 3 {
			t.Fatalf("pool of python:3.12 after 3 creates = %d, want 3", got)
		}
		e.p.Release(context.Background(), "python:3.12")
		if got := len(e.pooledImage("python:3.12")); got != 0 {
			t.Errorf("pooled containers of a released image = %d, want 0", got)
		}
		e.p.Release(context.Background(), baseImage)
		e.create(t, "base") // wakes the refill
		synctest.Wait()
		if got := len(e.pooledImage("python:3.12")); got != 0 {
			t.Errorf("a refill made %d containers of the released image again", got)
		}
		if got := len(e.pooledImage(baseImage)); got != baseFloor {
			t.Errorf("base pool after a release of its image = %d, want %d: built-in pools stay", got, baseFloor)
		}
	})
}

func TestPoolLearnedSizeSurvivesRebuild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, autoPool(1024), nil)
		synctest.Wait()
		e.burst(t, 6, "base")
		synctest.Wait()
		advance(10 * time.Second)
		e.rt.Rebuild(baseImage)
		if id := e.create(t, "base"); id != "" { // a miss: wakes the refill
			t.Errorf("a create claimed %s, of the image before its rebuild", id)
		}
		synctest.Wait()
		if got := len(e.pooledImage(baseImage)); got != 6 {
			t.Errorf("pool of the rebuilt image = %d, want the learned 6", got)
		}
		if got := e.p.Ready(); got != 6 {
			t.Errorf("pool = %d, want 6, none of the old image", got)
		}
	})
}

// A burst of base that would fill the budget alone leaves room for the
// pool of a template created now and then.
func TestPoolBudgetSharedWithOtherTemplates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := burstBeyondBudget(t, 8, 20)
		e.create(t, "python:3.12") // a miss: makes its demand known
		synctest.Wait()
		if got := len(e.pooledImage("python:3.12")); got != 1 {
			t.Fatalf("pool of python:3.12 beside base's = %d, want 1", got)
		}
		if got := len(e.pooledImage(baseImage)); got != baseFloor+7 {
			t.Errorf("base pool = %d, want %d: one of its containers gave way", got, baseFloor+7)
		}
		ready := e.pooledImage("python:3.12")
		advance(2 * time.Second)
		if id := e.create(t, "python:3.12"); !ready[id] {
			t.Error("the second create of python:3.12 did not claim from its pool")
		}
	})
}

// A learned pool's containers are made with its template's resources, so
// that a claim changes nothing on the engine.
func TestPoolLearnsTemplateResources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, autoPool(1024), nil)
		e.tpls.set("python:3.12", 2, 1024)
		e.create(t, "python:3.12")
		synctest.Wait()
		ready := e.pooledImage("python:3.12")
		if len(ready) != 1 {
			t.Fatalf("pool of the template after a create = %d, want 1", len(ready))
		}
		sb := e.sandboxOf(t, "python:3.12")
		c, ok := e.claim(t, sb)
		if !ok || !ready[c.Container.ID] {
			t.Fatal("the second create did not claim from the template's pool")
		}
		defer c.Done()
		defer c.Settled()
		if err := c.Fit(context.Background(), sb.CPUCount, sb.MemoryMB); err != nil {
			t.Fatal(err)
		}
		if l, _ := e.rt.LimitsOf(c.Container.ID); l.CPUCount != 2 || l.MemoryMB != 1024 {
			t.Errorf("claimed container's limits %+v, want the template's 2 CPUs, 1024 MiB", l)
		}
		if slices.Contains(e.rt.Calls(), "Update "+c.Container.ID) {
			t.Error("fitting the claim updated the container's limits")
		}
		// A base container, made with the server's resources, is fitted.
		base := e.sandboxOf(t, "base")
		c, ok = e.claim(t, base)
		if !ok {
			t.Fatal("no base container to claim")
		}
		if err := c.Fit(context.Background(), 1, 256); err != nil {
			t.Fatal(err)
		}
		if l, _ := e.rt.LimitsOf(c.Container.ID); l.CPUCount != 1 || l.MemoryMB != 256 {
			t.Errorf("fitted base container's limits %+v, want 1 CPU, 256 MiB", l)
		}
		c.Settled()
		c.Done()
	})
}
