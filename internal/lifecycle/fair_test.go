package lifecycle

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
)

// serialEngine is a fake engine that starts one container at a time, in
// the order asked, each in engineStart: a container's start takes longer
// the more are in flight before it, as on a busy Docker engine.
type serialEngine struct {
	*fake.Runtime
	mu   sync.Mutex
	free time.Time // when the engine will have started every container asked of it so far
}

const engineStart = 100 * time.Millisecond

func (e *serialEngine) Create(ctx context.Context, spec sandbox.ContainerSpec) (sandbox.Container, error) {
	e.mu.Lock()
	e.free = later(time.Now(), e.free).Add(engineStart)
	done := e.free
	e.mu.Unlock()
	time.Sleep(time.Until(done))
	return e.Runtime.Create(ctx, spec)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestFairAdmission: while team a bursts creates on an engine that
// starts one container at a time, team b's creates, one after another,
// are served between a's, not after them: once b creates, a holds half
// the gate's slots, so each of b's creates waits for no more than that
// many of a's, where it waited for a full gate's before.
func TestFairAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *config) {
			c.Runtime = &serialEngine{Runtime: c.Runtime.(*fake.Runtime)}
		})
		slots := max(4*runtime.NumCPU(), 4) // the cold gate's
		var mu sync.Mutex
		var done []string // the teams of the creates done, in order
		create := func(team string) error {
			_, err := e.m.Create(context.Background(), CreateRequest{TeamID: team, Timeout: time.Hour})
			mu.Lock()
			defer mu.Unlock()
			done = append(done, team)
			return err
		}
		var burst sync.WaitGroup
		for range 4 * slots {
			burst.Go(func() {
				if err := create("a"); err != nil {
					t.Errorf("a's create: %v", err)
				}
			})
		}
		synctest.Wait() // a's burst fills the gate and queues

		for i := range 5 {
			mu.Lock()
			before := len(done)
			mu.Unlock()
			if err := create("b"); err != nil {
				t.Fatalf("b's create %d: %v", i, err)
			}
			mu.Lock()
			ahead := len(done) - before - 1
			mu.Unlock()
			// b's first create meets a's full gate; the next ones meet
			// a's share of it.
			if limit := slots / 2; i > 0 && ahead > limit {
				t.Errorf("b's create %d waited for %d of a's creates, want at most %d (a's share of the %d slots)", i, ahead, limit, slots)
			}
		}
		burst.Wait()
	})
}

// heldEngine is a fake engine whose container starts wait until let
// closes.
type heldEngine struct {
	*fake.Runtime
	let chan struct{}
}

func (e *heldEngine) Create(ctx context.Context, spec sandbox.ContainerSpec) (sandbox.Container, error) {
	<-e.let
	return e.Runtime.Create(ctx, spec)
}

// creates counts the engine's container creates so far.
func creates(rt *fake.Runtime) int {
	n := 0
	for _, c := range rt.Calls() {
		if strings.HasPrefix(c, "Create ") {
			n++
		}
	}
	return n
}

// TestGoneClientStartsNothing: a create whose client went away while it
// waited at the full cold gate starts no container when its turn comes
// (it used to start one, and kill it once up), and is refused.
func TestGoneClientStartsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		held := &heldEngine{let: make(chan struct{})}
		e := newEnv(t, func(c *config) {
			held.Runtime = c.Runtime.(*fake.Runtime)
			c.Runtime = held
		})
		slots := e.m.pool.ColdSlots()
		var burst sync.WaitGroup
		for range slots {
			burst.Go(func() {
				if _, err := e.m.Create(context.Background(), CreateRequest{TeamID: "a", Timeout: time.Hour}); err != nil {
					t.Errorf("a's create: %v", err)
				}
			})
		}
		synctest.Wait() // the gate is full

		client, leave := context.WithCancel(context.Background())
		gone := make(chan error, 1)
		go func() {
			_, err := e.m.Create(client, CreateRequest{TeamID: "a", Timeout: time.Hour})
			gone <- err
		}()
		synctest.Wait() // it waits at the gate
		leave()
		close(held.let)
		burst.Wait()
		if err := <-gone; sandbox.KindOf(err) != sandbox.KindUnavailable {
			t.Errorf("the gone client's create: %v, want unavailable", err)
		}
		if n := creates(e.rt); n != slots {
			t.Errorf("the engine created %d containers, want %d: the gone client's create started one", n, slots)
		}
	})
}

// TestKillYieldsToLighterTeam: while team a's burst fills the cold gate
// and team b's one create waits for its turn, a's kill does not remove
// its sandbox's container on the engine b's create needs: the removal
// waits for a slot of a's share of the gate, which b's create has first
// (it used to remove it at once, beside the gate's full slots).
func TestKillYieldsToLighterTeam(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		held := &heldEngine{let: make(chan struct{})}
		e := newEnv(t, func(c *config) {
			held.Runtime = c.Runtime.(*fake.Runtime)
			c.Runtime = held
		})
		done := make(chan struct{})
		var old sandbox.Sandbox
		go func() {
			defer close(done)
			old = e.create(t, CreateRequest{TeamID: "a"})
		}()
		synctest.Wait()
		held.let <- struct{}{}
		<-done

		slots := e.m.pool.ColdSlots()
		var burst sync.WaitGroup
		for range 2 * slots {
			burst.Go(func() {
				if _, err := e.m.Create(context.Background(), CreateRequest{TeamID: "a", Timeout: time.Hour}); err != nil {
					t.Errorf("a's create: %v", err)
				}
			})
		}
		synctest.Wait() // a's burst fills the gate and queues
		bDone := make(chan sandbox.Sandbox, 1)
		go func() { bDone <- e.create(t, CreateRequest{TeamID: "b"}) }()
		synctest.Wait() // b's create waits for its turn
		killed := make(chan error, 1)
		go func() { killed <- e.m.Kill(context.Background(), "a", old.ID) }()
		synctest.Wait()
		if removed(e.rt, old.ContainerID) {
			t.Error("a's kill removed its container while b's create waited to start")
		}
		unknown := make(chan error, 1)
		go func() { unknown <- e.m.Kill(context.Background(), "a", "no-such-sandbox") }()
		synctest.Wait()
		select {
		case err := <-unknown:
			if sandbox.KindOf(err) != sandbox.KindNotFound {
				t.Errorf("kill of an unknown sandbox: %v, want not found", err)
			}
		default:
			t.Error("a kill of an unknown sandbox waited for a removal slot")
		}
		close(held.let)
		b := <-bDone
		if err := <-killed; err != nil {
			t.Fatalf("a's kill: %v", err)
		}
		calls := e.rt.Calls()
		if r, c := slices.Index(calls, "Remove "+old.ContainerID), slices.Index(calls, "Create "+b.ID); r < c {
			t.Errorf("a's kill removed its container (call %d) before b's create made its own (call %d)", r, c)
		}
		burst.Wait()
	})
}

// removed reports whether the engine was asked to remove container id.
func removed(rt *fake.Runtime, id string) bool {
	return slices.Contains(rt.Calls(), "Remove "+id)
}
