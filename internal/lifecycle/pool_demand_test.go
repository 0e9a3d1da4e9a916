package lifecycle

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
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
		advance(poolSaveInterval)
		if got := e.savedDemand(t)[BaseTemplate]; len(got.Peaks) != 1 || got.Peaks[0].Size != 8 {
			t.Errorf("saved demand of base after %s = %+v, want one peak of 8", poolSaveInterval, got)
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
		advance(poolWindow)
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

// What is saved is bounded: the templates that want the most, each with
// its largest peaks, and they load back to the same size.
func TestPoolDemandSavedIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDemand()
		for i := range poolSavedTemplates + 36 {
			var ends []func()
			for range i + 1 {
				ends = append(ends, d.begin(poolKind{template: fmt.Sprintf("t%03d", i)}, team))
			}
			for _, end := range ends {
				end()
			}
		}
		// One template whose demand steps down from 150, a peak every 2 s
		// (within poolDemandCap starts).
		const top = 150
		for n := top; n > top-poolSavedPeaks-10; n-- {
			var ends []func()
			for range n {
				ends = append(ends, d.begin(poolKind{template: "steps"}, team))
			}
			for _, end := range ends {
				end()
			}
			time.Sleep(2 * poolRateSpan)
		}
		ds, _, changed := d.toSave()
		if !changed {
			t.Error("demand never saved reported unchanged")
		}
		if len(ds) != poolSavedTemplates {
			t.Fatalf("saved %d templates, want at most %d", len(ds), poolSavedTemplates)
		}
		saved := map[string]sandbox.PoolDemand{}
		for _, pd := range ds {
			saved[pd.TemplateID] = pd
			if len(pd.Peaks) > poolSavedPeaks {
				t.Errorf("%s saved with %d peaks, want at most %d", pd.TemplateID, len(pd.Peaks), poolSavedPeaks)
			}
		}
		if ds[0].TemplateID != "steps" || ds[1].TemplateID != "t099" {
			t.Errorf("saved first %s, %s; want steps, t099: those that want the most", ds[0].TemplateID, ds[1].TemplateID)
		}
		if _, ok := saved["t000"]; ok {
			t.Error("t000, which wants the least, was saved")
		}
		if p := saved["steps"].Peaks; len(p) != poolSavedPeaks || p[0].Size != top || p[len(p)-1].Size != top-poolSavedPeaks+1 {
			t.Errorf("steps saved as %+v, want its %d largest peaks from %d down", p, poolSavedPeaks, top)
		}
		loaded := newDemand()
		for _, pd := range ds {
			loaded.load(poolKind{template: pd.TemplateID}, pd.TeamID, pd.Peaks)
		}
		for _, id := range []string{"t099", "t050", "steps"} {
			if got, want := loaded.want(id), d.want(id); got != want {
				t.Errorf("%s wants %d after a load, %d before", id, got, want)
			}
		}
		if _, _, changed := loaded.toSave(); changed {
			t.Error("loaded demand reported changed: a restart would save it again at once")
		}
	})
}
