package warmpool

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

const team = sandbox.DefaultTeamID

// What is saved is bounded: the templates that want the most, each with
// its largest peaks, and they load back to the same size.
func TestPoolDemandSavedIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDemand()
		for i := range savedTemplates + 36 {
			var ends []func()
			for range i + 1 {
				ends = append(ends, d.begin(kind{template: fmt.Sprintf("t%03d", i)}, team))
			}
			for _, end := range ends {
				end()
			}
		}
		// One template whose demand steps down from 150, a peak every 2 s
		// (within demandCap starts).
		const top = 150
		for n := top; n > top-savedPeaks-10; n-- {
			var ends []func()
			for range n {
				ends = append(ends, d.begin(kind{template: "steps"}, team))
			}
			for _, end := range ends {
				end()
			}
			time.Sleep(2 * rateSpan)
		}
		ds, _, changed := d.toSave()
		if !changed {
			t.Error("demand never saved reported unchanged")
		}
		if len(ds) != savedTemplates {
			t.Fatalf("saved %d templates, want at most %d", len(ds), savedTemplates)
		}
		saved := map[string]sandbox.PoolDemand{}
		for _, pd := range ds {
			saved[pd.TemplateID] = pd
			if len(pd.Peaks) > savedPeaks {
				t.Errorf("%s saved with %d peaks, want at most %d", pd.TemplateID, len(pd.Peaks), savedPeaks)
			}
		}
		if ds[0].TemplateID != "steps" || ds[1].TemplateID != "t099" {
			t.Errorf("saved first %s, %s; want steps, t099: those that want the most", ds[0].TemplateID, ds[1].TemplateID)
		}
		if _, ok := saved["t000"]; ok {
			t.Error("t000, which wants the least, was saved")
		}
		if p := saved["steps"].Peaks; len(p) != savedPeaks || p[0].Size != top || p[len(p)-1].Size != top-savedPeaks+1 {
			t.Errorf("steps saved as %+v, want its %d largest peaks from %d down", p, savedPeaks, top)
		}
		loaded := newDemand()
		for _, pd := range ds {
			loaded.load(kind{template: pd.TemplateID}, pd.TeamID, pd.Peaks)
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

// The span within which creates count as one burst follows the time a
// refill takes, smoothed, between rateSpan and rateSpanMax.
func TestDemandSpanFollowsRefillTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDemand()
		k := kind{template: "t"}
		for range 12 { // one create every 500 ms, each alone in flight
			d.begin(k, team)()
			time.Sleep(500 * time.Millisecond)
		}
		if got := d.want("t"); got != 3 {
			t.Errorf("want with no refill measured = %d, want 3 (those within a second)", got)
		}
		d.refilled("t", 2*time.Second)
		if got := d.want("t"); got != 6 {
			t.Errorf("want with 2 s refills = %d, want 6 (those within 2 s, and a spare)", got)
		}
		d.refilled("t", 10*time.Second) // one slow start moves it a quarter of the way
		d.mu.Lock()
		span := d.spanLocked("t")
		d.mu.Unlock()
		if span != 4*time.Second {
			t.Errorf("span after a 10 s refill following 2 s = %v, want 4s", span)
		}
		d.refilled("t", time.Hour)
		d.mu.Lock()
		span = d.spanLocked("t")
		d.mu.Unlock()
		if span != rateSpanMax {
			t.Errorf("span = %v, want at most %v", span, rateSpanMax)
		}
	})
}

// A loop of creates one at a time, a second apart, of a template whose
// refill takes longer than that: its pool keeps a spare beyond the creates
// of a span, which a pool that refills within a second does not need.
func TestDemandSpareForSlowRefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDemand()
		k := kind{template: "t"}
		for range 4 { // a miss's whole start between creates: 3 s apart
			d.begin(k, team)()
			time.Sleep(3 * time.Second)
		}
		d.refilled("t", 500*time.Millisecond)
		if got := d.want("t"); got != 1 {
			t.Errorf("want with 0.5 s refills = %d, want 1", got)
		}
		d.refilled("t", 2500*time.Millisecond)
		d.refilled("t", 2500*time.Millisecond)
		if got := d.want("t"); got != 2 {
			t.Errorf("want with 2-3 s refills = %d, want 2 (one a span, and a spare)", got)
		}
		if got := newDemand().want("other"); got != 0 {
			t.Errorf("want of a template never created = %d, want 0", got)
		}
	})
}

func TestFitBudget(t *testing.T) {
	base, ci := ContainerMB, 80 // as lifecycle gives the code interpreter
	for _, tc := range []struct {
		name     string
		kinds    []kind
		budgetMB int
		want     []int
	}{{
		name: "all fit",
		kinds: []kind{
			{template: "base", size: 10, floor: 2},
			{template: "mine", size: 5},
		},
		budgetMB: 13 * base,
		want:     []int{10, 5},
	}, {
		name: "a burst's pool leaves room for the others",
		kinds: []kind{
			{template: "base", size: 100, floor: 2},
			{template: "code-interpreter-v1", size: 3, pinned: true},
			{template: "mine", size: 2},
			{template: "theirs", size: 1},
		},
		budgetMB: 20 * base,
		want:     []int{2 + 17, 3, 2, 1},
	}, {
		name: "shared evenly when none fits",
		kinds: []kind{
			{template: "base", size: 12, floor: 2},
			{template: "mine", size: 8},
			{template: "theirs", size: 9},
		},
		budgetMB: 10 * base,
		want:     []int{2 + 4, 3, 3},
	}, {
		name: "a container the budget cannot pay for is not given",
		kinds: []kind{
			{template: "code-interpreter-v1", size: 4, floor: 1, budgetMB: ci},
			{template: "base", size: 4, floor: 2},
		},
		budgetMB: ci + 2*base,
		want:     []int{1 + 1, 2 + 2},
	}, {
		name: "no budget: the floors",
		kinds: []kind{
			{template: "base", size: 10, floor: 2},
			{template: "mine", size: 5},
		},
		budgetMB: 0,
		want:     []int{2, 0},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			fitBudget(tc.kinds, tc.budgetMB)
			var got []int
			for _, k := range tc.kinds {
				got = append(got, k.size)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("sizes = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPoolDemandSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, autoPool(1024), nil)
		synctest.Wait()
		e.burst(t, 8, "base")
		synctest.Wait()
		if got := e.store.saved(); len(got) != 0 {
			t.Errorf("demand saved at once after a create: %v; want it saved on a timer", got)
		}
		advance(SaveInterval)
		if got := e.store.saved()["base"]; len(got.Peaks) != 1 || got.Peaks[0].Size != 8 {
			t.Errorf("saved demand of base after %s = %+v, want one peak of 8", SaveInterval, got)
		}

		e.restart(t, 0)
		if got := e.p.Stats().Size["base"]; got != 8 {
			t.Errorf("pool size after a restart within the window = %d, want the learned 8", got)
		}
		if got := e.p.Ready(); got != 8 {
			t.Errorf("pool after a restart within the window = %d, want 8", got)
		}

		// Down past the window: what it learned is too old to keep.
		e.restart(t, Window)
		if got := e.p.Stats().Size["base"]; got != baseFloor {
			t.Errorf("pool size after a restart past the window = %d, want the floor %d", got, baseFloor)
		}
		if got := e.p.Ready(); got != baseFloor {
			t.Errorf("pool after a restart past the window = %d, want the floor %d", got, baseFloor)
		}
	})
}

// A close saves the demand at once, without waiting for the timer, and
// a learned template's pool comes back with it.
func TestPoolDemandSavedAtClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, autoPool(1024), nil)
		synctest.Wait()
		e.burst(t, 3, "python:3.12")
		synctest.Wait()
		e.restart(t, 0)
		if got := len(e.pooledImage("python:3.12")); got != 3 {
			t.Errorf("pool of python:3.12 after a restart = %d, want the learned 3", got)
		}
	})
}

func TestPoolDemandOfDeletedTemplateDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, autoPool(1024), nil)
		synctest.Wait()
		e.burst(t, 3, "python:3.12")
		e.burst(t, 4, "base")
		synctest.Wait()
		imageID, _ := e.rt.ImageIDOf("python:3.12")
		e.p.Close()
		if err := e.rt.RemoveImage(context.Background(), "python:3.12"); err != nil {
			t.Fatal(err)
		}
		e.start(t)
		synctest.Wait()
		for _, c := range e.pooled() {
			if c.ImageID == imageID {
				t.Errorf("pooled container %s of the removed template's image", c.ID)
			}
		}
		if got, ok := e.p.Stats().Size["python:3.12"]; ok {
			t.Errorf("pool size of the removed template = %d, want none", got)
		}
		e.restart(t, 0)
		if d, ok := e.store.saved()["python:3.12"]; ok {
			t.Errorf("the removed template's demand is still saved: %+v", d)
		}
		if _, ok := e.store.saved()["base"]; !ok {
			t.Error("base's demand was dropped with the removed template's")
		}
	})
}
