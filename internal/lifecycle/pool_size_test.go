package lifecycle

import (
	"context"
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
