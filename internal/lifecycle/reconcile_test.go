package lifecycle

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

func TestReconcileOnRestart(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	adopt := e.create(t, CreateRequest{Template: "base"})
	stopped := e.create(t, CreateRequest{Template: "base"})
	vanish := e.create(t, CreateRequest{Template: "base"})
	frozen := e.create(t, CreateRequest{Template: "base"})
	e.m.Pause(ctx, team, frozen.ID, true)
	e.stop()

	// Behind Warren's back: the engine moved a port, stopped one
	// container, lost another, and grew a stray and a half-made sandbox.
	c, _ := e.container(t, adopt.ContainerID)
	c.AgentAddr = "127.0.0.1:1"
	e.rt.Put(c)
	c, _ = e.container(t, stopped.ContainerID)
	c.Running, c.AgentAddr = false, ""
	e.rt.Put(c)
	e.rt.Remove(ctx, vanish.ContainerID)
	e.rt.Put(sandbox.Container{ID: "stray", SandboxID: "inobody", Running: true,
		Labels: map[string]string{sandbox.LabelManaged: "true", sandbox.LabelSandbox: "inobody"}})
	e.rt.Put(sandbox.Container{ID: "other", Running: true}) // not Warren's: left alone
	st, _ := e.store.GetSandbox(ctx, adopt.ID)
	st.ID, st.State, st.ContainerID = "ihalfmade", sandbox.StateCreating, "halfmade"
	e.restartWith(t, st)

	if got := e.state(t, adopt.ID); got.State != sandbox.StateRunning || got.AgentAddr != "127.0.0.1:1" {
		t.Errorf("adopted: state %s addr %s", got.State, got.AgentAddr)
	}
	if got := e.state(t, stopped.ID); got.State != sandbox.StatePaused || got.PauseMode != sandbox.PauseStopped {
		t.Errorf("stopped: state %s mode %s, want paused stopped", got.State, got.PauseMode)
	}
	if got := e.state(t, vanish.ID); got.State != sandbox.StateKilled {
		t.Errorf("vanished: state %s, want killed", got.State)
	}
	if got := e.state(t, frozen.ID); got.State != sandbox.StatePaused || got.PauseMode != sandbox.PauseFrozen {
		t.Errorf("frozen: state %s mode %s", got.State, got.PauseMode)
	}
	if _, err := e.store.GetSandbox(ctx, "ihalfmade"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("half-made sandbox kept: %v", err)
	}
	for id, want := range map[string]bool{"stray": false, "halfmade": false, "other": true, adopt.ContainerID: true} {
		if _, ok := e.container(t, id); ok != want {
			t.Errorf("container %s present = %v, want %v", id, ok, want)
		}
	}
	// The stopped one resumes like any paused sandbox.
	if _, resumed, err := e.m.Connect(ctx, team, stopped.ID, time.Minute, true); err != nil || !resumed {
		t.Errorf("connect after restart: resumed=%v err=%v", resumed, err)
	}
}

// restartWith restarts after putting a half-made sandbox and its
// container in place.
func (e *env) restartWith(t *testing.T, halfMade sandbox.Sandbox) {
	t.Helper()
	e.rt.Put(sandbox.Container{ID: halfMade.ContainerID, SandboxID: halfMade.ID, Running: true,
		Labels: map[string]string{sandbox.LabelManaged: "true", sandbox.LabelSandbox: halfMade.ID}})
	st, err := sqlite.Open(context.Background(), filepath.Join(e.dir, "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutSandbox(context.Background(), halfMade); err != nil {
		t.Fatal(err)
	}
	st.Close()
	e.start(t, nil)
}

func TestReconcileWhileRunning(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{Template: "base"})
	e.rt.StopAll() // dockerd restarted
	if err := e.m.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.Get(ctx, team, sb.ID)
	if err != nil || got.State != sandbox.StatePaused {
		t.Fatalf("after engine restart: state %s err %v, want paused", got.State, err)
	}
	if s := e.stopped(); len(s) != 1 {
		t.Errorf("OnStop calls = %v", s)
	}
	if _, resumed, err := e.m.Connect(ctx, team, sb.ID, time.Minute, true); err != nil || !resumed {
		t.Errorf("connect: resumed=%v err=%v", resumed, err)
	}
}
