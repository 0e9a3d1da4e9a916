package lifecycle

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/warmpool"
)

// slowStarts is an engine whose containers take start to make, as a pod
// on a busy cluster does, and which starts parallel at once (a
// sandbox.ParallelStarter) unless parallel is 0. It counts the creates
// that were no pool's (cold), and the most of the pool's in flight at once
// (a cold create through the gate is no refill's and may come beside them).
type slowStarts struct {
	*fake.Runtime
	start    time.Duration
	parallel int

	mu         sync.Mutex
	cold       int
	inFlight   int
	inFlightHi int
}

func (s *slowStarts) Create(ctx context.Context, spec sandbox.ContainerSpec) (sandbox.Container, error) {
	pooled := spec.Labels[sandbox.LabelPool] != ""
	s.mu.Lock()
	if !pooled {
		s.cold++
	} else {
		s.inFlight++
		s.inFlightHi = max(s.inFlightHi, s.inFlight)
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if pooled {
			s.inFlight--
		}
		s.mu.Unlock()
	}()
	time.Sleep(s.start)
	return s.Runtime.Create(ctx, spec)
}

func (s *slowStarts) counts() (cold, inFlightHi int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cold, s.inFlightHi
}

type parallelSlowStarts struct{ *slowStarts }

func (p parallelSlowStarts) ParallelStarts() int { return p.parallel }

// oneAtATime creates n sandboxes of base back to back, as a client
// waiting for each before the next, gap apart (its own work with each),
// and kills each.
func (e *env) oneAtATime(t *testing.T, n int, gap time.Duration) {
	t.Helper()
	for range n {
		sb := e.create(t, CreateRequest{Template: "base"})
		time.Sleep(gap)
		if err := e.m.Kill(context.Background(), team, sb.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// Back-to-back creates on an engine whose starts take 2 s: the pool learns
// how many begin within a refill's time (not within a second), refills as
// many at once as the engine starts, and replaces what claims take without
// waiting for the containers in flight. So the first run of 20 creates
// 300 ms apart finds it mostly ready (its floor of 2 and what it learns on
// the way), and once it has seen them it serves every one.
func TestPoolKeepsUpWithBackToBackCreatesOnSlowStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &slowStarts{Runtime: fake.New("warren/base", "python:3.12"), start: 2 * time.Second, parallel: 8}
		e := &env{rt: rt.Runtime, agent: fake.NewAgent(), dir: t.TempDir()}
		e.start(t, func(c *config) {
			withAutoPool(1024)(c)
			c.Runtime = parallelSlowStarts{rt}
			// A reconcile waiting (on a mutex: not durably blocked) for a
			// sandbox whose cold create sleeps would stop the bubble's clock.
			c.ReconcileInterval = time.Hour
		})
		advance(10 * time.Second)
		var misses []int
		for range 3 {
			before, _ := rt.counts()
			e.oneAtATime(t, 20, 300*time.Millisecond)
			after, _ := rt.counts()
			misses = append(misses, after-before)
			advance(10 * time.Second)
		}
		if misses[0] > 5 || misses[2] != 0 {
			t.Errorf("runs of 20 back-to-back creates missed the pool %v times, want at most 5 the first time and none the third", misses)
		}
		if got, want := e.m.WarmPoolReady(), 7; got < want {
			t.Errorf("pool after them = %d, want at least %d (those begun within 2 s)", got, want)
		}
		if _, hi := rt.counts(); hi > 8 {
			t.Errorf("%d pooled containers made at once, more than the engine's 8", hi)
		}
	})
}

// newGatedEnv is an env whose agent's inits can be held (gatedInits).
func newGatedEnv(t *testing.T, tweak func(*config)) (*env, *gatedInits) {
	t.Helper()
	agent := &gatedInits{Agent: fake.NewAgent()}
	e := &env{rt: fake.New("warren/base", "python:3.12"), agent: agent.Agent, dir: t.TempDir()}
	e.start(t, func(c *config) {
		c.Agent = agent
		tweak(c)
	})
	return e, agent
}

// createInBackground creates a sandbox of template in a goroutine of its
// own, and delivers the outcome.
func (e *env) createInBackground(template string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := e.m.Create(context.Background(), CreateRequest{TeamID: team, Template: template, Timeout: time.Minute})
		done <- err
	}()
	return done
}

// gatedInits is an agent whose inits wait, between a hold and its
// release, for the release.
type gatedInits struct {
	*fake.Agent
	mu   sync.Mutex
	gate chan struct{} // nil: inits go through
}

// hold makes inits wait from now on, until the function it returns.
func (a *gatedInits) hold() (release func()) {
	g := make(chan struct{})
	a.mu.Lock()
	a.gate = g
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		a.gate = nil
		a.mu.Unlock()
		close(g)
	}
}

func (a *gatedInits) Init(ctx context.Context, addr string, init sandbox.AgentInit) error {
	a.mu.Lock()
	g := a.gate
	a.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return a.Agent.Init(ctx, addr, init)
}

// The first create of a template, which gives the template its pool,
// does not share the engine with that pool's first container: the refill
// holds it until the create is made, for at most warmpool.ClaimHold.
func TestPoolRefillWaitsForTheCreateBesideIt(t *testing.T) {
	tests := []struct {
		name    string
		release time.Duration // when the create's agent answers
		// wantMade is how many containers the template's pool has made
		// at half the hold, and after it.
		wantMade [2]int
	}{
		{"create made", warmpool.ClaimHold / 4, [2]int{1, 1}},
		{"create slower than the hold", 3 * warmpool.ClaimHold / 2, [2]int{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, agent := newGatedEnv(t, withAutoPool(1024))
				synctest.Wait()
				time.AfterFunc(tt.release, agent.hold())
				created := e.createInBackground("python:3.12")
				time.Sleep(warmpool.ClaimHold / 2)
				synctest.Wait()
				if got := len(e.pooledImage(t, "python:3.12")); got != tt.wantMade[0] {
					t.Errorf("pooled containers of the template at half the hold = %d, want %d", got, tt.wantMade[0])
				}
				time.Sleep(warmpool.ClaimHold/2 + warmpool.ClaimPoll)
				synctest.Wait()
				if got := len(e.pooledImage(t, "python:3.12")); got != tt.wantMade[1] {
					t.Errorf("pooled containers of the template after the hold = %d, want %d", got, tt.wantMade[1])
				}
				if err := <-created; err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
