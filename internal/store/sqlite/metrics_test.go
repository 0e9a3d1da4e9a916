package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// TestMetricsThinning samples a sandbox every 5 s for 26 hours, keeping an
// hour (720 samples) at full resolution, and reads ranges of its history:
// the last hour whole, the rest of the last day one a minute, the first
// two hours one per 10 minutes.
func TestMetricsThinning(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const (
		every = 5 * time.Second
		keep  = 720
	)
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	n := int(26 * time.Hour / every)
	var dayRows int
	for i := range n {
		st := sandbox.Stats{Time: start.Add(time.Duration(i) * every), CPUUsedPct: float64(i)}
		if err := s.AddMetric(ctx, "i1", st, keep); err != nil {
			t.Fatal(err)
		}
		if i == int(24*time.Hour/every)-1 {
			dayRows = rows(t, s, "i1")
		}
	}
	newest := start.Add(time.Duration(n-1) * every)
	t.Logf("rows after a day: %d, after 26 hours: %d", dayRows, rows(t, s, "i1"))

	// At most the samples of each tier, and the few that left the full
	// resolution since the last thinning.
	if want := keep + 24*60 + 12; dayRows > want {
		t.Errorf("after a day: %d rows, want at most %d", dayRows, want)
	}
	if want := keep + 24*60 + 2*6 + 12; rows(t, s, "i1") > want {
		t.Errorf("after 26 hours: %d rows, want at most %d", rows(t, s, "i1"), want)
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

// TestMetricsKeepAll checks that keep <= 0 keeps every sample.
func TestMetricsKeepAll(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	for i := range 600 {
		st := sandbox.Stats{Time: t0.Add(time.Duration(i) * 10 * time.Second)}
		if err := s.AddMetric(ctx, "i1", st, 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := rows(t, s, "i1"); got != 600 {
		t.Errorf("%d rows, want all 600", got)
	}
}

func rows(t *testing.T, s *DB, sandboxID string) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM sandbox_metrics WHERE sandbox_id = ?`, sandboxID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
