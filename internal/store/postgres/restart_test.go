package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/postgres/pgtest"
)

// The bounds of TestServerRestart: no call may take longer than callBound,
// down or up, and writes must succeed again within recoverBound of the
// server's start.
const (
	callBound    = 5 * time.Second
	recoverBound = 5 * time.Second
)

// A PostgreSQL restart (a fast stop, then a start on the same port and
// data) loses nothing the store acknowledged, fails the calls made while
// the server is down quickly instead of leaving them hanging, and the
// store writes again within seconds of the start: the pool drops the
// connections the restart closed and dials new ones, and the writers go
// on with their next batches. Writers keep writing a sandbox's state, its
// next state with its event and the event's webhook delivery, and a
// metric sample (a write that reads what it writes, committed the slow
// way) throughout, so that the stop cuts batches in flight: each of their
// writes must be acknowledged and present, or fail to its caller; a state
// with its event and their delivery are there together or not at all.
func TestServerRestart(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	s, err := Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	w := &workload{s: s}
	for i := range 20 {
		if err := w.create(ctx, fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatalf("a write before the restart: %v", err)
		}
	}

	stop := w.start(ctx, 8)
	w.waitAcked(t, 200)
	srv.Stop()
	down := time.Now()
	calls := map[string]func() error{
		"a read":  func() error { _, err := s.GetSandbox(ctx, "before-0"); return err },
		"a write": func() error { return s.PutSandbox(ctx, sandbox.Sandbox{ID: "down", State: sandbox.StateRunning}) },
	}
	for name, call := range calls {
		err := within(t, callBound, name+" with PostgreSQL down", call)
		if err == nil {
			t.Errorf("%s with PostgreSQL down succeeded", name)
		} else if sandbox.KindOf(err) != sandbox.KindUnavailable || sandbox.RetryAfter(err) == 0 {
			t.Errorf("%s with PostgreSQL down: %v (kind %v, Retry-After %v), want unavailable with a Retry-After",
				name, err, sandbox.KindOf(err), sandbox.RetryAfter(err))
		}
	}
	srv.Start()
	up := time.Now()
	t.Logf("PostgreSQL started again %v after its stop", up.Sub(down).Round(time.Millisecond))
	for i := 0; ; i++ {
		err := within(t, callBound, "a write after PostgreSQL's start", func() error {
			return w.create(ctx, fmt.Sprintf("after-%d", i))
		})
		if err == nil {
			break
		}
		if time.Since(up) > recoverBound {
			t.Fatalf("writes still fail %v after PostgreSQL's start: %v", recoverBound, err)
		}
	}
	t.Logf("first write acknowledged %v after PostgreSQL's start", time.Since(up).Round(time.Millisecond))
	w.waitAcked(t, w.acked.Load()+200)

	within(t, callBound, "the workload's calls, once told to stop,", func() error { <-stop(); return nil })
	defer s.Close()
	w.check(t, ctx)

	// A store left idle across a restart quicker than the pool's check of
	// idle connections (those idle for over a second) holds only closed
	// ones: the first write after it must not fail for that.
	srv.Stop()
	srv.Start()
	err = within(t, callBound, "the first write after a restart of an idle store", func() error {
		return s.PutSandbox(ctx, sandbox.Sandbox{ID: "idle", TeamID: sandbox.DefaultTeamID, State: sandbox.StateRunning})
	})
	if err != nil {
		t.Errorf("the first write after a restart of an idle store: %v", err)
	}
}

// within returns what call returns, or fails tb when it has not returned
// after d: a call must not hang, store up or down. The store is left
// open then, as its Close would wait for a stuck writer too.
func within(tb testing.TB, d time.Duration, what string, call func() error) error {
	tb.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		tb.Fatalf("%s has not returned after %v", what, d)
		return nil
	}
}

// workload is a sandbox's writes, made by several goroutines at once,
// and what came of each.
type workload struct {
	s     *DB
	acked atomic.Int64 // creates whose writes were all acknowledged

	mu      sync.Mutex // guards what follows
	tried   []string   // every sandbox ID the workload wrote
	ok      map[string]bool
	slowest time.Duration
	failed  int
	lastErr error
	unclear error // the first failure not KindUnavailable
}

// create makes a create's writes for sandbox id, in order, and records
// which were acknowledged under "sb:" (the sandbox creating), "ev:" (the
// sandbox running, with its event and delivery) and "m:" + id.
func (w *workload) create(ctx context.Context, id string) error {
	now := time.Now()
	ev := sandbox.Event{ID: "e-" + id, Type: sandbox.EventCreated, Time: now, SandboxID: id, TeamID: sandbox.DefaultTeamID}
	d := sandbox.Delivery{ID: "d-" + id, WebhookID: "w1", EventID: ev.ID, SandboxID: id,
		Status: sandbox.DeliveryPending, NextAttempt: now, CreatedAt: now}
	writes := []struct {
		key string
		run func() error
	}{
		{"sb:", func() error {
			return w.s.PutSandbox(ctx, sandbox.Sandbox{ID: id, TeamID: sandbox.DefaultTeamID, State: sandbox.StateCreating, StartedAt: now})
		}},
		{"ev:", func() error {
			return w.s.PutSandbox(ctx, sandbox.Sandbox{ID: id, TeamID: sandbox.DefaultTeamID, State: sandbox.StateRunning, StartedAt: now},
				sandbox.Recorded{Event: ev, Deliveries: []sandbox.Delivery{d}})
		}},
		{"m:", func() error { return w.s.AddMetric(ctx, id, sandbox.Stats{Time: now, CPUCount: 1}, 0) }},
	}
	w.mu.Lock()
	w.tried = append(w.tried, id)
	w.mu.Unlock()
	var first error
	for _, wr := range writes {
		t0 := time.Now()
		err := wr.run()
		w.record(wr.key+id, err, time.Since(t0))
		if first == nil {
			first = err
		}
	}
	if first == nil {
		w.acked.Add(1)
	}
	return first
}

func (w *workload) record(key string, err error, took time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ok == nil {
		w.ok = map[string]bool{}
	}
	w.ok[key] = err == nil
	w.slowest = max(w.slowest, took)
	if err != nil {
		w.failed++
		w.lastErr = err
		if sandbox.KindOf(err) != sandbox.KindUnavailable && w.unclear == nil {
			w.unclear = err
		}
	}
}

// start runs n goroutines that create sandboxes until the function it
// returns is called; that function's channel closes once they are done.
func (w *workload) start(ctx context.Context, n int) (stop func() <-chan struct{}) {
	var quit atomic.Bool
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			for i := 0; !quit.Load(); i++ {
				w.create(ctx, fmt.Sprintf("w%d-%d", g, i))
			}
		})
	}
	return func() <-chan struct{} {
		quit.Store(true)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		return done
	}
}

// waitAcked waits until n creates were acknowledged, or fails tb.
func (w *workload) waitAcked(tb testing.TB, n int64) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for w.acked.Load() < n {
		if time.Now().After(deadline) {
			w.mu.Lock()
			defer w.mu.Unlock()
			tb.Fatalf("%d creates acknowledged after 20 s, want %d; last error: %v", w.acked.Load(), n, w.lastErr)
		}
		time.Sleep(time.Millisecond)
	}
}

// check reads back every sandbox the workload wrote: what was
// acknowledged is there, and each running state is there with its event
// and their delivery or not at all.
func (w *workload) check(t *testing.T, ctx context.Context) {
	t.Helper()
	evs, err := w.s.Events(ctx, events.Query{TeamID: sandbox.DefaultTeamID})
	if err != nil {
		t.Fatal(err)
	}
	haveEvent := map[string]bool{}
	for _, ev := range evs {
		haveEvent[ev.ID] = true
	}
	ds, err := w.s.Deliveries(ctx, "w1", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	haveDelivery := map[string]bool{}
	for _, d := range ds {
		haveDelivery[d.ID] = true
	}
	var lost, torn []string
	for _, id := range w.tried {
		sb, err := w.s.GetSandbox(ctx, id)
		if err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Fatal(err)
		}
		ms, merr := w.s.Metrics(ctx, id, time.Time{}, time.Time{})
		if merr != nil {
			t.Fatal(merr)
		}
		for key, have := range map[string]bool{"sb:": err == nil, "ev:": haveEvent["e-"+id], "m:": len(ms) > 0} {
			if w.ok[key+id] && !have {
				lost = append(lost, key+id)
			}
		}
		running := err == nil && sb.State == sandbox.StateRunning
		if haveEvent["e-"+id] != haveDelivery["d-"+id] || haveEvent["e-"+id] != running {
			torn = append(torn, id)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d writes were acknowledged and are lost, among them %v", len(lost), lost[:min(len(lost), 5)])
	}
	if len(torn) > 0 {
		t.Errorf("%d states, events and deliveries are stored one without the others, among them those of %v",
			len(torn), torn[:min(len(torn), 5)])
	}
	t.Logf("%d creates, %d acknowledged in full, %d writes failed, the slowest call took %v; last error: %v",
		len(w.tried), w.acked.Load(), w.failed, w.slowest.Round(time.Millisecond), w.lastErr)
	if w.unclear != nil {
		t.Errorf("a write failed with %v (kind %v), want the store unavailable", w.unclear, sandbox.KindOf(w.unclear))
	}
	if w.slowest > callBound {
		t.Errorf("a call took %v, want at most %v", w.slowest, callBound)
	}
}
