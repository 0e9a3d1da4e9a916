package fake

import (
	"context"
	"slices"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// WriteLog appends lines to a container's log, as if its processes had
// written them; Logs returns them. Lines without a Time get time.Now().
func (r *Runtime) WriteLog(id string, lines ...sandbox.LogLine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.logs == nil {
		r.logs = map[string][]sandbox.LogLine{}
	}
	for _, l := range lines {
		if l.Time.IsZero() {
			l.Time = time.Now()
		}
		if l.Stream == "" {
			l.Stream = "stderr"
		}
		r.logs[id] = append(r.logs[id], l)
	}
}

// Logs returns the lines written with WriteLog at or after since. It is
// not recorded in Calls, since reading logs changes nothing.
func (r *Runtime) Logs(ctx context.Context, id string, since time.Time) ([]sandbox.LogLine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.fail["Logs"]; err != nil {
		return nil, err
	}
	if _, ok := r.containers[id]; !ok {
		return nil, notFound(id)
	}
	var out []sandbox.LogLine
	for _, l := range r.logs[id] {
		if !l.Time.Before(since) {
			out = append(out, l)
		}
	}
	slices.SortStableFunc(out, func(a, b sandbox.LogLine) int { return a.Time.Compare(b.Time) })
	return out, nil
}
