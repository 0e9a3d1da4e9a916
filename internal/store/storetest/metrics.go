package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sandbox"
)

func testLogsAndMetrics(t *testing.T, s Store) {
	ctx := t.Context()
	for i := range 5 {
		e := sandbox.LogEntry{SandboxID: "i1", Time: t0.Add(time.Duration(i) * time.Second), Level: "info", Message: string(rune('a' + i)), Fields: map[string]string{"i": "x"}}
		if err := s.AppendLog(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.Logs(ctx, "i1", sandbox.LogQuery{Since: t0.Add(time.Second), Limit: 2})
	if diff := cmp.Diff([]string{"b", "c"}, messages(got)); diff != "" {
		t.Errorf("forward (-want +got):\n%s", diff)
	}
	got, _ = s.Logs(ctx, "i1", sandbox.LogQuery{Until: t0.Add(3 * time.Second), Backward: true, Limit: 2})
	if diff := cmp.Diff([]string{"d", "c"}, messages(got)); diff != "" {
		t.Errorf("backward (-want +got):\n%s", diff)
	}
	got, _ = s.Logs(ctx, "i1", sandbox.LogQuery{})
	if diff := cmp.Diff([]string{"a", "b", "c", "d", "e"}, messages(got)); diff != "" {
		t.Errorf("all (-want +got):\n%s", diff)
	}
	want := sandbox.LogEntry{SandboxID: "i1", Time: t0, Level: "info", Message: "a", Fields: map[string]string{"i": "x"}}
	if diff := cmp.Diff(want, got[0]); diff != "" {
		t.Errorf("an entry (-want +got):\n%s", diff)
	}
	for i := range 5 {
		st := sandbox.Stats{Time: t0.Add(time.Duration(i) * time.Second), CPUUsedPct: float64(i)}
		if err := s.AddMetric(ctx, "i1", st, 3); err != nil {
			t.Fatal(err)
		}
	}
	ms, _ := s.Metrics(ctx, "i1", time.Time{}, time.Time{})
	var pct []float64
	for _, m := range ms {
		pct = append(pct, m.CPUUsedPct)
	}
	// History beyond keep is thinned to one a minute (MetricsThinning).
	if diff := cmp.Diff([]float64{0, 1, 2, 3, 4}, pct); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	ms, _ = s.Metrics(ctx, "i1", t0.Add(3*time.Second), t0.Add(3*time.Second))
	if len(ms) != 1 || !ms[0].Time.Equal(t0.Add(3*time.Second)) {
		t.Errorf("range query = %v, want the sample at +3s", ms)
	}
}

func messages(es []sandbox.LogEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Message)
	}
	return out
}

// keep <= 0 keeps every sample.
func testMetricsKeepAll(t *testing.T, s Store) {
	ctx := t.Context()
	for i := range 200 {
		st := sandbox.Stats{Time: t0.Add(time.Duration(i) * time.Minute)}
		if err := s.AddMetric(ctx, "i1", st, 0); err != nil {
			t.Fatal(err)
		}
	}
	if ms, _ := s.Metrics(ctx, "i1", time.Time{}, time.Time{}); len(ms) != 200 {
		t.Errorf("%d samples, want all 200", len(ms))
	}
}

// testMetricsThinning samples a sandbox every 30 s for 26 hours, keeping
// an hour (120 samples) at full resolution, and reads ranges of its
// history: the last hour whole, the rest of the last day one a minute,
// the first two hours one per 10 minutes.
func testMetricsThinning(t *testing.T, s Store) {
	ctx := t.Context()
	const (
		every = 30 * time.Second
		keep  = 120
	)
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	n := int(26 * time.Hour / every)
	count := func() int {
		ms, err := s.Metrics(ctx, "i1", time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return len(ms)
	}
	var dayRows int
	for i := range n {
		st := sandbox.Stats{Time: start.Add(time.Duration(i) * every), CPUUsedPct: float64(i)}
		if err := s.AddMetric(ctx, "i1", st, keep); err != nil {
			t.Fatal(err)
		}
		if i == int(24*time.Hour/every)-1 {
			dayRows = count()
		}
	}
	newest := start.Add(time.Duration(n-1) * every)
	total := count()
	t.Logf("samples after a day: %d, after 26 hours: %d", dayRows, total)

	// At most the samples of each tier, and the few that left the full
	// resolution since the last thinning.
	if want := keep + 24*60 + 2; dayRows > want {
		t.Errorf("after a day: %d samples, want at most %d", dayRows, want)
	}
	if want := keep + 24*60 + 2*6 + 2; total > want {
		t.Errorf("after 26 hours: %d samples, want at most %d", total, want)
	}

	tests := []struct {
		name     string
		from, to time.Time
		count    int
		step     time.Duration
	}{
		{"last hour", newest.Add(-(keep - 1) * every), newest, keep, every},
		{"earlier today", newest.Add(-20 * time.Hour), newest.Add(-19*time.Hour - time.Second), 60, time.Minute},
		{"over a day ago", start.Add(20 * time.Minute), start.Add(80*time.Minute - time.Second), 6, 10 * time.Minute},
		{"before the sandbox", start.Add(-time.Hour), start.Add(-time.Second), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Metrics(ctx, "i1", tt.from, tt.to)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.count {
				t.Fatalf("%d samples in [%v, %v], want %d", len(got), tt.from, tt.to, tt.count)
			}
			for i := 1; i < len(got); i++ {
				if d := got[i].Time.Sub(got[i-1].Time); d != tt.step {
					t.Fatalf("samples %v and %v are %v apart, want %v", got[i-1].Time, got[i].Time, d, tt.step)
				}
			}
		})
	}
}
