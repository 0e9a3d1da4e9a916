package lifecycle

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
)

// A pause cuts the sandbox's proxied streams (OnStop) before the engine
// freezes, stops or checkpoints it, and again once it is recorded paused,
// whatever the pause mode and whoever pauses (the API, the timeout or the
// operator).
func TestPauseCutsStreamsFirst(t *testing.T) {
	for _, tc := range []struct {
		name       string
		gvisor     bool
		keepMemory bool
		byTimeout  bool
		byOperator bool   // warren sandbox stop
		engine     string // the runtime call that pauses the container
	}{
		{name: "frozen", keepMemory: true, engine: "Freeze"},
		{name: "stopped", engine: "Stop"},
		{name: "checkpointed", gvisor: true, keepMemory: true, engine: "Checkpoint"},
		{name: "frozen at the timeout", keepMemory: true, byTimeout: true, engine: "Freeze"},
		{name: "stopped at the timeout", byTimeout: true, engine: "Stop"},
		{name: "stopped by the operator", byOperator: true, engine: "Stop"},
		{name: "checkpointed by the operator", gvisor: true, byOperator: true, engine: "Checkpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type cut struct {
				calls []string      // the runtime's calls so far
				state sandbox.State // the sandbox's recorded state
			}
			var (
				e    *env
				mu   sync.Mutex
				cuts []cut
			)
			e = newEnv(t, func(c *config) {
				if tc.gvisor {
					gvisor(c)
					c.PauseToDisk = true
				}
				c.TickInterval = 10 * time.Millisecond
				c.OnStop = func(id string) {
					sb, _ := e.store.GetSandbox(context.Background(), id)
					mu.Lock()
					defer mu.Unlock()
					cuts = append(cuts, cut{e.rt.Calls(), sb.State})
				}
			})
			sb := e.create(t, CreateRequest{Lifecycle: sandbox.Lifecycle{OnTimeout: sandbox.TimeoutPause, KeepMemory: tc.keepMemory}})
			if tc.byTimeout {
				if err := e.m.SetTimeout(context.Background(), team, sb.ID, time.Millisecond); err != nil {
					t.Fatal(err)
				}
				// The sweep pauses it; its second cut ends the pause.
				deadline := time.Now().Add(5 * time.Second)
				for n := 0; n < 2; {
					if time.Now().After(deadline) {
						t.Fatal("the sandbox was not paused at its timeout")
					}
					time.Sleep(10 * time.Millisecond)
					mu.Lock()
					n = len(cuts)
					mu.Unlock()
				}
			} else if tc.byOperator {
				if _, err := e.m.Stop(context.Background(), team, sb.ID); err != nil {
					t.Fatal(err)
				}
			} else if err := e.m.Pause(context.Background(), team, sb.ID, tc.keepMemory); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			call := tc.engine + " " + sb.ContainerID
			if len(cuts) != 2 {
				t.Fatalf("OnStop called %d times, want 2 (before the engine pauses it, once it is paused)", len(cuts))
			}
			if slices.Contains(cuts[0].calls, call) || cuts[0].state != sandbox.StateRunning {
				t.Errorf("first cut after %q (state %s): the streams must be cut before the engine pauses the container", call, cuts[0].state)
			}
			if !slices.Contains(cuts[1].calls, call) || cuts[1].state != sandbox.StatePaused {
				t.Errorf("second cut: calls %v, state %s; want after %q, paused", cuts[1].calls, cuts[1].state, call)
			}
		})
	}
}

// While a sandbox is being paused, the proxy's requests for it wait for
// the pause to end and are then judged as requests to a paused sandbox: a
// request that arrives mid-pause neither reaches it nor wakes it unless it
// is admitted.
func TestRouteWaitsForPause(t *testing.T) {
	type routed struct {
		sb  sandbox.Sandbox
		err error
	}
	var (
		e         *env
		sb        sandbox.Sandbox
		once      sync.Once
		done      = make(chan routed, 1)
		early     bool // Route returned while the pause was under way
		admitSaw  sandbox.State
		errRefuse = errors.New("no credentials")
	)
	e = newEnv(t, func(c *config) {
		c.Runtime = freezeHook{c.Runtime.(*fake.Runtime), func() {
			once.Do(func() {
				go func() {
					sb, err := e.m.Route(context.Background(), sb.ID, func(sb sandbox.Sandbox) error {
						admitSaw = sb.State
						return errRefuse
					})
					done <- routed{sb, err}
				}()
				// The engine is freezing the container: Route must not
				// answer now.
				select {
				case <-done:
					early = true
				case <-time.After(100 * time.Millisecond):
				}
			})
		}}
	})
	sb = e.create(t, CreateRequest{Lifecycle: sandbox.Lifecycle{OnTimeout: sandbox.TimeoutPause, AutoResume: true, KeepMemory: true}})
	if err := e.m.Pause(context.Background(), team, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	if early {
		t.Fatal("Route answered for a sandbox being paused instead of waiting for the pause")
	}
	got := <-done
	if !errors.Is(got.err, errRefuse) || admitSaw != sandbox.StatePaused {
		t.Errorf("Route after the pause: err %v, admit saw %s; want the refusal of a paused sandbox", got.err, admitSaw)
	}
	if st := e.state(t, sb.ID).State; st != sandbox.StatePaused {
		t.Errorf("state %s after a refused request, want paused", st)
	}

	// An admitted request still resumes it.
	res, err := e.m.Route(context.Background(), sb.ID, nil)
	if err != nil || res.State != sandbox.StateRunning {
		t.Fatalf("Route admitted: state %s, err %v", res.State, err)
	}
}

// freezeHook is a fake runtime that calls before at the start of every
// Freeze.
type freezeHook struct {
	*fake.Runtime
	before func()
}

func (f freezeHook) Freeze(ctx context.Context, id string) error {
	f.before()
	return f.Runtime.Freeze(ctx, id)
}
