package lifecycle

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// newEventEnv is newEnv on a runtime that reports events.
func newEventEnv(t *testing.T, tweak func(*config)) *env {
	t.Helper()
	e := newEnv(t, func(c *config) {
		c.Runtime.(interface{ ReportEvents() }).ReportEvents()
		if tweak != nil {
			tweak(c)
		}
	})
	return e
}

// logged reports whether a sandbox's event log has a message.
func (e *env) logged(t *testing.T, id, msg string) bool {
	t.Helper()
	entries, err := e.store.Logs(context.Background(), id, sandbox.LogQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(entries, func(l sandbox.LogEntry) bool { return l.Message == msg })
}

// TestEngineEventsReconcileAtOnce: a container killed or removed behind
// Warren's back is reconciled as soon as the engine says so, with no time
// passing, as the periodic reconcile would do it 30 s later: killed means
// paused (stopped, resumable), removed means killed; either way its
// egress rules go and the proxy is told.
func TestEngineEventsReconcileAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fw := &fakeFirewall{rules: map[string]sandbox.Network{}}
		e := newEventEnv(t, func(c *config) { c.Firewall = fw })
		killed := e.create(t, CreateRequest{Template: "base"})
		removed := e.create(t, CreateRequest{Template: "base"})
		frozen := e.create(t, CreateRequest{Template: "base"})
		kept := e.create(t, CreateRequest{Template: "base"})
		if err := e.m.Pause(context.Background(), team, frozen.ID, true); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()

		e.rt.Kill(killed.ContainerID)
		e.rt.Vanish(removed.ContainerID)
		e.rt.Kill(frozen.ContainerID)
		synctest.Wait()

		if got := e.state(t, killed.ID); got.State != sandbox.StatePaused || got.PauseMode != sandbox.PauseStopped {
			t.Errorf("killed container: state %s mode %s, want paused stopped", got.State, got.PauseMode)
		}
		if got := e.state(t, removed.ID); got.State != sandbox.StateKilled {
			t.Errorf("removed container: state %s, want killed", got.State)
		}
		if got := e.state(t, frozen.ID); got.State != sandbox.StatePaused || got.PauseMode != sandbox.PauseStopped {
			t.Errorf("killed frozen container: state %s mode %s, want paused stopped", got.State, got.PauseMode)
		}
		if got := e.state(t, kept.ID).State; got != sandbox.StateRunning {
			t.Errorf("untouched sandbox: state %s", got)
		}
		if got, want := fw.ids(), []string{kept.ID}; !slices.Equal(got, want) {
			t.Errorf("egress rules of %v, want only %v", got, want)
		}
		stops := e.stopped()
		slices.Sort(stops)
		if want := slices.Sorted(slices.Values([]string{killed.ID, removed.ID, frozen.ID, frozen.ID})); !slices.Equal(stops, want) {
			t.Errorf("OnStop calls = %v, want %v (the frozen one's two from its pause)", stops, want)
		}
		if _, err := e.m.Get(context.Background(), team, removed.ID); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Errorf("get of the removed one: %v, want not found", err)
		}
		// The killed one resumes like any paused sandbox.
		if _, resumed, err := e.m.Connect(context.Background(), team, killed.ID, time.Minute, true); err != nil || !resumed {
			t.Errorf("connect: resumed=%v err=%v", resumed, err)
		}
	})
}

// TestEngineEventsOfOwnOperations: the events of Warren's own pause,
// stop, resume and kill (the fake, like Docker, sends them while the
// operation holds the sandbox) change nothing: no sandbox is reported
// found stopped, and the proxy is told once per stop.
func TestEngineEventsOfOwnOperations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tweak func(*config)
	}{
		{"runc", nil},
		{"gvisor", gvisor}, // demotion and Stop checkpoint
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEventEnv(t, tc.tweak)
				ctx := context.Background()
				stopped := e.create(t, CreateRequest{Template: "base", Timeout: time.Hour})
				frozen := e.create(t, CreateRequest{Template: "base", Timeout: time.Hour})
				onDisk := e.create(t, CreateRequest{Template: "base", Timeout: time.Hour})
				killed := e.create(t, CreateRequest{Template: "base", Timeout: time.Hour})
				if err := e.m.Pause(ctx, team, stopped.ID, false); err != nil {
					t.Fatal(err)
				}
				if err := e.m.Pause(ctx, team, frozen.ID, true); err != nil {
					t.Fatal(err)
				}
				if _, err := e.m.Stop(ctx, team, onDisk.ID); err != nil {
					t.Fatal(err)
				}
				if err := e.m.Kill(ctx, team, killed.ID); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				for _, want := range []struct {
					sb    sandbox.Sandbox
					state sandbox.State
				}{{stopped, sandbox.StatePaused}, {frozen, sandbox.StatePaused}, {onDisk, sandbox.StatePaused}, {killed, sandbox.StateKilled}} {
					if got := e.state(t, want.sb.ID).State; got != want.state {
						t.Errorf("%s: state %s, want %s", want.sb.ID, got, want.state)
					}
				}
				// Resumes (a start, a thaw, a restore) and a demotion.
				for _, sb := range []sandbox.Sandbox{stopped, frozen, onDisk} {
					if _, resumed, err := e.m.Connect(ctx, team, sb.ID, time.Hour, true); err != nil || !resumed {
						t.Fatalf("connect %s: resumed=%v err=%v", sb.ID, resumed, err)
					}
				}
				if err := e.m.Pause(ctx, team, frozen.ID, true); err != nil {
					t.Fatal(err)
				}
				advance(11 * time.Minute) // FreezeMaxAge: demoted to disk
				if got := e.state(t, frozen.ID); got.State != sandbox.StatePaused || got.PauseMode == sandbox.PauseFrozen {
					t.Errorf("demoted: state %s mode %s", got.State, got.PauseMode)
				}
				for _, sb := range []sandbox.Sandbox{stopped, frozen, onDisk, killed} {
					if e.logged(t, sb.ID, "sandbox found stopped; now paused") || e.logged(t, sb.ID, "sandbox container vanished") {
						t.Errorf("%s: Warren's own operation taken for one behind its back", sb.ID)
					}
				}
				if got := len(e.stopped()); got != 9 {
					t.Errorf("OnStop calls = %v, want 9 (before and after each of two pauses, the stop and the second pause, one for the kill; none from events or the demotion)", e.stopped())
				}
			})
		})
	}
}

// TestEngineEventStreamReconnects: when the engine's stream breaks (an
// engine restart) the manager subscribes again as soon as the engine
// lets it and reconciles what it missed meanwhile, well before the
// periodic reconcile.
func TestEngineEventStreamReconnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventEnv(t, nil)
		sb := e.create(t, CreateRequest{Template: "base"})
		e.rt.Fail("WatchContainers", errors.New("engine restarting"))
		e.rt.BreakWatches()
		advance(2 * time.Second)
		if n := e.rt.Watchers(); n != 0 {
			t.Fatalf("%d watchers while the engine refuses", n)
		}
		e.rt.Kill(sb.ContainerID) // unseen: no stream
		e.rt.Fail("WatchContainers", nil)
		advance(watchBackoffMax)
		if n := e.rt.Watchers(); n != 1 {
			t.Errorf("%d watchers once the engine is back, want 1", n)
		}
		if got := e.state(t, sb.ID).State; got != sandbox.StatePaused {
			t.Errorf("state after resubscribing = %s, want paused", got)
		}
		// Events flow again.
		other := e.create(t, CreateRequest{Template: "base"})
		e.rt.Vanish(other.ContainerID)
		synctest.Wait()
		if got := e.state(t, other.ID).State; got != sandbox.StateKilled {
			t.Errorf("state of a container removed after resubscribing = %s, want killed", got)
		}
	})
}

// TestEngineEventsPrunePool: a pooled container killed behind Warren's
// back leaves the pool at once, is removed, and the pool refills.
func TestEngineEventsPrunePool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventEnv(t, withPool(1))
		synctest.Wait()
		pool := e.pooledContainers(t)
		if len(pool) != 1 {
			t.Fatalf("pool: %v", pool)
		}
		e.rt.Kill(pool[0].ID)
		synctest.Wait()
		if _, ok := e.container(t, pool[0].ID); ok {
			t.Error("killed pooled container kept")
		}
		now := e.pooledContainers(t)
		if len(now) != 1 || now[0].ID == pool[0].ID || !now[0].Running || e.m.WarmPoolReady() != 1 {
			t.Errorf("pool after the kill: %v, %d ready", now, e.m.WarmPoolReady())
		}
		// A claim gets the new one.
		if sb := e.create(t, CreateRequest{Template: "base"}); sb.ContainerID != now[0].ID {
			t.Errorf("claimed %s, want %s", sb.ContainerID, now[0].ID)
		}
	})
}
