package phases

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMarkWithoutTraceRecordsNothing(t *testing.T) {
	Mark(context.Background(), "engine_start") // must not panic
	if s := From(context.Background()).String(); s != "" {
		t.Errorf("no trace: String() = %q, want \"\"", s)
	}
	var h Histograms
	if got := h.Snapshot(); len(got) != 0 {
		t.Fatalf("empty histograms: %v", got)
	}
}

func TestTraceSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, tr := Start(context.Background())
		time.Sleep(3 * time.Millisecond)
		Mark(ctx, "save")
		time.Sleep(40 * time.Millisecond)
		Mark(ctx, "engine_start")
		time.Sleep(2 * time.Millisecond)
		Mark(ctx, "save") // a second save sums with the first
		time.Sleep(time.Millisecond)
		steps, total := tr.Steps()
		want := []Step{{"save", 5 * time.Millisecond}, {"engine_start", 40 * time.Millisecond}}
		if diff := cmp.Diff(want, steps); diff != "" {
			t.Errorf("steps (-want +got):\n%s", diff)
		}
		if total != 46*time.Millisecond {
			t.Errorf("total = %v, want 46ms", total)
		}
		if got, want := tr.String(), "save=5ms engine_start=40ms total=46ms"; got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	})
}

func TestHistogramsObserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h Histograms
		for _, d := range []time.Duration{3 * time.Millisecond, 4 * time.Millisecond, time.Minute} {
			ctx, tr := Start(context.Background())
			time.Sleep(d)
			Mark(ctx, "agent_wait")
			h.Observe("cold", tr)
		}
		got := h.Snapshot()
		if len(got) != 2 || got[0].Step != "agent_wait" || got[1].Step != Total {
			t.Fatalf("series: %+v", got)
		}
		s := got[0]
		if s.Path != "cold" || s.Count != 3 || s.Sum != time.Minute+7*time.Millisecond {
			t.Errorf("count %d sum %v of %s, want 3 and 1m0.007s of cold", s.Count, s.Sum, s.Path)
		}
		want := make([]uint64, len(Bounds)+1)
		want[3]++ // 3 ms: ≤ 0.003
		want[4]++ // 4 ms: ≤ 0.005
		want[len(Bounds)]++
		if diff := cmp.Diff(want, s.Counts); diff != "" {
			t.Errorf("buckets (-want +got):\n%s", diff)
		}
	})
}
