package lifecycle

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/warmpool"
)

// savedDemand returns the store's saved demand by template ID.
func (e *env) savedDemand(t *testing.T) map[string]sandbox.PoolDemand {
	t.Helper()
	ds, err := e.store.PoolDemand(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]sandbox.PoolDemand{}
	for _, d := range ds {
		out[d.TemplateID] = d
	}
	return out
}

// restart closes the manager and starts another on the same store and
// engine, as a restart of the server does.
func (e *env) restart(t *testing.T, tweak func(*config)) {
	t.Helper()
	e.stop()
	e.start(t, tweak)
	synctest.Wait()
}

func TestPoolDemandSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withAutoPool(1024))
		synctest.Wait()
		e.burst(t, 8, "base")
		synctest.Wait()
		if got := e.savedDemand(t); len(got) != 0 {
			t.Errorf("demand saved at once after a create: %v; want it saved on a timer", got)
		}
		advance(warmpool.SaveInterval)
		if got := e.savedDemand(t)[BaseTemplate]; len(got.Peaks) != 1 || got.Peaks[0].Size != 8 {
			t.Errorf("saved demand of base after %s = %+v, want one peak of 8", warmpool.SaveInterval, got)
		}

		e.restart(t, withAutoPool(1024))
		if got := e.m.ServerStats(context.Background()).PoolSize[BaseTemplate]; got != 8 {
			t.Errorf("pool size after a restart within the window = %d, want the learned 8", got)
		}
		if got := e.m.WarmPoolReady(); got != 8 {
			t.Errorf("pool after a restart within the window = %d, want 8", got)
		}

		// Down past the window: what it learned is too old to keep.
		e.stop()
		advance(warmpool.Window)
		e.start(t, withAutoPool(1024))
		synctest.Wait()
		if got := e.m.ServerStats(context.Background()).PoolSize[BaseTemplate]; got != DefaultWarmPool {
			t.Errorf("pool size after a restart past the window = %d, want the floor %d", got, DefaultWarmPool)
		}
		if got := e.m.WarmPoolReady(); got != DefaultWarmPool {
			t.Errorf("pool after a restart past the window = %d, want the floor %d", got, DefaultWarmPool)
		}
	})
}

// A close saves the demand at once, without waiting for the timer, and
// a learned template's pool comes back with it.
func TestPoolDemandSavedAtClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withAutoPool(1024))
		synctest.Wait()
		e.burst(t, 3, "python:3.12")
		synctest.Wait()
		e.restart(t, withAutoPool(1024))
		if got := len(e.pooledImage(t, "python:3.12")); got != 3 {
			t.Errorf("pool of python:3.12 after a restart = %d, want the learned 3", got)
		}
	})
}

func TestPoolDemandOfDeletedTemplateDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withAutoPool(1024))
		synctest.Wait()
		e.burst(t, 3, "python:3.12")
		e.burst(t, 4, "base")
		synctest.Wait()
		imageID, _ := e.rt.ImageIDOf("python:3.12")
		e.stop()
		if err := e.rt.RemoveImage(context.Background(), "python:3.12"); err != nil {
			t.Fatal(err)
		}
		e.start(t, withAutoPool(1024))
		synctest.Wait()
		for _, c := range e.pooledContainers(t) {
			if c.ImageID == imageID {
				t.Errorf("pooled container %s of the removed template's image", c.ID)
			}
		}
		if got := e.m.ServerStats(context.Background()).PoolSize["python:3.12"]; got != 0 {
			t.Errorf("pool size of the removed template = %d, want none", got)
		}
		e.restart(t, withAutoPool(1024))
		if d, ok := e.savedDemand(t)["python:3.12"]; ok {
			t.Errorf("the removed template's demand is still saved: %+v", d)
		}
		if _, ok := e.savedDemand(t)[BaseTemplate]; !ok {
			t.Error("base's demand was dropped with the removed template's")
		}
	})
}
