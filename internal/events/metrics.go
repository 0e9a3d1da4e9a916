package events

import (
	"context"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// TeamMetric is a team's sandboxes over one step of time, as E2B's team
// metrics give them.
type TeamMetric struct {
	Time time.Time // the start of the step
	// Concurrent is the most sandboxes of the team running at once during
	// the step.
	Concurrent int
	// StartRate is the sandboxes created during the step, per second.
	StartRate float64
}

// maxSteps bounds the points of one series.
const maxSteps = 1000

// metricStep is the step of a series over [start, end): at least 5 s,
// and at most maxSteps of them.
func metricStep(start, end time.Time) time.Duration {
	step := 5 * time.Second
	for end.Sub(start)/step > maxSteps {
		step *= 2
	}
	return step
}

// TeamMetrics returns team's sandboxes over [start, end), step by step,
// from its lifecycle events: only what the retention kept is counted.
func (s *Service) TeamMetrics(ctx context.Context, team string, start, end time.Time) ([]TeamMetric, error) {
	if !start.Before(end) {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "start must be before end")
	}
	evs, err := s.store.Events(ctx, Query{TeamID: team, Ascending: true, Before: end})
	if err != nil {
		return nil, err
	}
	step := metricStep(start, end)
	running := map[string]bool{}
	change := func(ev sandbox.Event) {
		switch ev.Type {
		case sandbox.EventCreated, sandbox.EventResumed:
			running[ev.SandboxID] = true
		case sandbox.EventPaused, sandbox.EventKilled:
			delete(running, ev.SandboxID)
		}
	}
	i := 0
	for ; i < len(evs) && evs[i].Time.Before(start); i++ {
		change(evs[i])
	}
	var out []TeamMetric
	for t := start; t.Before(end); t = t.Add(step) {
		m := TeamMetric{Time: t, Concurrent: len(running)}
		created := 0
		for ; i < len(evs) && evs[i].Time.Before(t.Add(step)); i++ {
			change(evs[i])
			if evs[i].Type == sandbox.EventCreated {
				created++
			}
			m.Concurrent = max(m.Concurrent, len(running))
		}
		m.StartRate = float64(created) / step.Seconds()
		out = append(out, m)
	}
	return out, nil
}
