// Package phases times the steps of one operation as it passes through
// the packages that do its work, and sums the times of many into
// histograms. A sandbox's create is the operation it was made for: the
// lifecycle starts a Trace, the lifecycle, the Docker runtime and the
// agent client Mark the steps they finish (the engine's create and
// start, the agent's first answer, its init), and GET /metrics exports
// the histograms, so that the cold path's time can be told apart into
// the engine's and Warren's.
//
// A Mark on a context without a Trace costs one context lookup and
// records nothing: code that marks steps may run outside a traced
// operation. It owns no output format; internal/api writes the
// histograms out.
package phases

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// Step is one finished step of a traced operation: the time from the
// previous Mark (or the trace's start) to its own.
type Step struct {
	Name string
	D    time.Duration
}

// Trace records the steps of one operation. Its methods are safe for
// concurrent use, though an operation's steps are usually sequential.
type Trace struct {
	mu    sync.Mutex // guards start, last and steps
	start time.Time
	last  time.Time
	steps []Step
}

type traceKey struct{}

// Start returns ctx carrying a new Trace, started now.
func Start(ctx context.Context) (context.Context, *Trace) {
	now := time.Now()
	t := &Trace{start: now, last: now, steps: make([]Step, 0, 16)}
	return context.WithValue(ctx, traceKey{}, t), t
}

// From returns ctx's Trace, nil when it has none.
func From(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// Mark ends the step name of ctx's Trace, if it has one: the time since
// the previous Mark is the step's. A name marked twice sums.
func Mark(ctx context.Context, name string) {
	if t := From(ctx); t != nil {
		t.mark(name)
	}
}

func (t *Trace) mark(name string) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.steps = append(t.steps, Step{name, now.Sub(t.last)})
	t.last = now
}

// Steps returns the steps so far, in order, one per name (a name marked
// twice sums, at its first place), and the time since the start.
func (t *Trace) Steps() (steps []Step, total time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.steps {
		if i := slices.IndexFunc(steps, func(o Step) bool { return o.Name == s.Name }); i >= 0 {
			steps[i].D += s.D
		} else {
			steps = append(steps, s)
		}
	}
	return steps, time.Since(t.start)
}

// String returns the steps so far and the total, for a log line:
// "save=2ms engine=310ms total=312ms"; "" for a nil Trace.
func (t *Trace) String() string {
	if t == nil {
		return ""
	}
	steps, total := t.Steps()
	var b strings.Builder
	for _, s := range append(steps, Step{Total, total}) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s.Name + "=" + s.D.Round(time.Millisecond).String())
	}
	return b.String()
}

// Bounds are the histograms' bucket upper bounds, in seconds: fine
// where a pooled create's steps fall (milliseconds), coarser up to a
// cold create's under load (tens of seconds).
var Bounds = []float64{
	0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075,
	0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30,
}

// Total is the name of the step Observe adds for a trace's whole time.
const Total = "total"

// Histograms sums the traces of many operations by path (what kind of
// operation: a cold create, a claim from the pool) and step. The zero
// value is ready to use.
type Histograms struct {
	mu     sync.Mutex // guards series
	series map[seriesKey]*Series
}

type seriesKey struct{ path, step string }

// Series is the histogram of one step of one path. Counts[i] counts the
// observations ≤ Bounds[i] and not ≤ Bounds[i-1]; the last one those
// above every bound.
type Series struct {
	Path, Step string
	Counts     []uint64 // len(Bounds)+1
	Sum        time.Duration
	Count      uint64
}

// Observe adds every step of t to path's histograms, and its whole time
// as the step Total. A nil t adds nothing.
func (h *Histograms) Observe(path string, t *Trace) {
	if t == nil {
		return
	}
	steps, total := t.Steps()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.series == nil {
		h.series = map[seriesKey]*Series{}
	}
	for _, s := range append(steps, Step{Total, total}) {
		k := seriesKey{path, s.Name}
		sr, ok := h.series[k]
		if !ok {
			sr = &Series{Path: path, Step: s.Name, Counts: make([]uint64, len(Bounds)+1)}
			h.series[k] = sr
		}
		i, _ := slices.BinarySearch(Bounds, s.D.Seconds())
		sr.Counts[i]++
		sr.Sum += s.D
		sr.Count++
	}
}

// Snapshot returns a copy of every series, by path then step name.
func (h *Histograms) Snapshot() []Series {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Series, 0, len(h.series))
	for _, s := range h.series {
		c := *s
		c.Counts = slices.Clone(s.Counts)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Series) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Step, b.Step))
	})
	return out
}
