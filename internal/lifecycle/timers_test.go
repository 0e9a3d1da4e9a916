package lifecycle

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// advance lets fake time pass and the manager's loops settle.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func TestTimeoutKills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		sb := e.create(t, CreateRequest{Template: "base", Timeout: time.Minute})
		advance(59 * time.Second)
		if got := e.state(t, sb.ID).State; got != sandbox.StateRunning {
			t.Fatalf("state before timeout = %s", got)
		}
		advance(2 * time.Second)
		if got := e.state(t, sb.ID).State; got != sandbox.StateKilled {
			t.Errorf("state after timeout = %s, want killed", got)
		}
		if _, ok := e.container(t, sb.ContainerID); ok {
			t.Error("container survives timeout")
		}
		if got := e.stopped(); len(got) != 1 {
			t.Errorf("OnStop calls = %v", got)
		}
	})
}

func TestTimeoutPausesAndPausedTimeIsNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *config) { c.FreezeMaxAge = -1 })
		ctx := context.Background()
		auto := e.create(t, CreateRequest{Template: "base", Timeout: time.Minute,
			Lifecycle: sandbox.Lifecycle{OnTimeout: sandbox.TimeoutPause, KeepMemory: false}})
		manual := e.create(t, CreateRequest{Template: "base", Timeout: time.Minute})

		advance(30 * time.Second)
		if err := e.m.Pause(ctx, team, manual.ID, true); err != nil {
			t.Fatal(err)
		}
		advance(31 * time.Second)
		got := e.state(t, auto.ID)
		if got.State != sandbox.StatePaused || got.PauseMode != sandbox.PauseStopped {
			t.Errorf("auto-pause: state %s mode %s, want paused stopped", got.State, got.PauseMode)
		}

		// An hour paused costs nothing: 30 s are still left on resume.
		advance(time.Hour)
		if got := e.state(t, manual.ID).State; got != sandbox.StatePaused {
			t.Fatalf("paused sandbox is %s after an hour", got)
		}
		res, _, err := e.m.Connect(ctx, team, manual.ID, time.Second, true)
		if err != nil {
			t.Fatal(err)
		}
		if left := time.Until(res.EndAt); left != 30*time.Second {
			t.Errorf("left after resume = %v, want 30s", left)
		}
		advance(29 * time.Second)
		if got := e.state(t, manual.ID).State; got != sandbox.StateRunning {
			t.Errorf("state 29s after resume = %s", got)
		}
		advance(2 * time.Second)
		if got := e.state(t, manual.ID).State; got != sandbox.StateKilled {
			t.Errorf("state 31s after resume = %s, want killed", got)
		}
	})
}

func TestFrozenDemotion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *config) { c.FreezeMaxAge = 10 * time.Minute; c.MaxFrozen = 2 })
		ctx := context.Background()
		var ids []string
		for range 3 {
			sb := e.create(t, CreateRequest{Template: "base", Timeout: time.Hour})
			ids = append(ids, sb.ID)
		}
		for _, id := range ids {
			e.m.Pause(ctx, team, id, true)
			advance(time.Second)
		}
		// Beyond the cap: the oldest frozen one is stopped.
		advance(time.Second)
		modes := func() []sandbox.PauseMode {
			var out []sandbox.PauseMode
			for _, id := range ids {
				out = append(out, e.state(t, id).PauseMode)
			}
			return out
		}
		if got := modes(); got[0] != sandbox.PauseStopped || got[1] != sandbox.PauseFrozen || got[2] != sandbox.PauseFrozen {
			t.Errorf("after cap: %v, want oldest stopped", got)
		}
		if c, _ := e.container(t, e.state(t, ids[0]).ContainerID); c.Running {
			t.Error("demoted container still running")
		}
		// By age: all stopped after the freeze limit.
		advance(10 * time.Minute)
		for i, m := range modes() {
			if m != sandbox.PauseStopped {
				t.Errorf("sandbox %d mode %s after freeze limit, want stopped", i, m)
			}
		}
		// A demoted sandbox still resumes.
		if _, resumed, err := e.m.Connect(ctx, team, ids[1], time.Minute, true); err != nil || !resumed {
			t.Errorf("connect demoted: resumed=%v err=%v", resumed, err)
		}
	})
}

func TestGarbageCollection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *config) {
			c.StoppedMaxAge = time.Hour
			c.KilledRetention = 10 * time.Minute
			c.TickInterval = 10 * time.Second
		})
		ctx := context.Background()
		sb := e.create(t, CreateRequest{Template: "base", Timeout: time.Hour})
		e.m.Pause(ctx, team, sb.ID, false)
		advance(59 * time.Minute)
		if got := e.state(t, sb.ID).State; got != sandbox.StatePaused {
			t.Fatalf("state before GC age = %s", got)
		}
		advance(2 * time.Minute)
		if got := e.state(t, sb.ID).State; got != sandbox.StateKilled {
			t.Errorf("state after GC age = %s, want killed", got)
		}
		if _, ok := e.container(t, sb.ContainerID); ok {
			t.Error("container survives GC")
		}
		advance(11 * time.Minute)
		if _, err := e.store.GetSandbox(ctx, sb.ID); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Errorf("killed record kept past retention: %v", err)
		}
	})
}

// A timeout set to 0 does at once what the sandbox's timeout would do.
func TestSetTimeoutZeroEndsNow(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	killed := e.create(t, CreateRequest{Template: "base", Timeout: time.Hour})
	paused := e.create(t, CreateRequest{Template: "base", Timeout: time.Hour,
		Lifecycle: sandbox.Lifecycle{OnTimeout: sandbox.TimeoutPause, KeepMemory: true}})
	for _, id := range []string{killed.ID, paused.ID} {
		if err := e.m.SetTimeout(ctx, team, id, 0); err != nil {
			t.Fatalf("SetTimeout(%s, 0): %v", id, err)
		}
	}
	if got := e.state(t, killed.ID).State; got != sandbox.StateKilled {
		t.Errorf("sandbox without lifecycle after timeout 0: %s, want killed", got)
	}
	got := e.state(t, paused.ID)
	if got.State != sandbox.StatePaused || got.PauseMode != sandbox.PauseFrozen || got.Remaining != 0 {
		t.Errorf("onTimeout pause after timeout 0: %s %s, %v left; want paused frozen, 0 left", got.State, got.PauseMode, got.Remaining)
	}
	wantKind(t, "timeout 0 on paused", e.m.SetTimeout(ctx, team, paused.ID, 0), sandbox.KindNotFound)
	wantKind(t, "negative timeout", e.m.SetTimeout(ctx, team, paused.ID, -time.Second), sandbox.KindInvalid)
}
