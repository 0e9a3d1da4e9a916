package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

func gvisor(c *config) { c.SandboxRuntime = sandbox.RuntimeGVisor }

// logText joins a sandbox's log messages and their fields.
func (e *env) logText(t *testing.T, id string) string {
	t.Helper()
	logs, err := e.store.Logs(context.Background(), id, sandbox.LogQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range logs {
		b.WriteString(l.Message)
		for _, k := range []string{"mode", "reason", "error"} {
			if v := l.Fields[k]; v != "" {
				b.WriteString(" " + k + "=" + v)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestDemotionModeByRuntime(t *testing.T) {
	for _, tc := range []struct {
		name    string
		runtime sandbox.OCIRuntime
		want    sandbox.PauseMode
	}{
		{"runc", sandbox.RuntimeRunc, sandbox.PauseStopped},
		{"gvisor", sandbox.RuntimeGVisor, sandbox.PauseCheckpointed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, func(c *config) { c.SandboxRuntime, c.FreezeMaxAge = tc.runtime, time.Minute })
				sb := e.create(t, CreateRequest{})
				if rt, _ := e.rt.RuntimeOf(sb.ContainerID); rt != tc.runtime {
					t.Errorf("container runtime %q, want %q", rt, tc.runtime)
				}
				if err := e.m.Pause(context.Background(), team, sb.ID, true); err != nil {
					t.Fatal(err)
				}
				advance(61 * time.Second)
				got := e.state(t, sb.ID)
				if got.State != sandbox.StatePaused || got.PauseMode != tc.want {
					t.Fatalf("after the freeze limit: %s %s, want paused %s", got.State, got.PauseMode, tc.want)
				}
				if c, _ := e.container(t, sb.ContainerID); c.Running {
					t.Error("demoted container still runs")
				}
				if want := "sandbox demoted to " + string(tc.want) + " reason=frozen too long"; !strings.Contains(e.logText(t, sb.ID), want) {
					t.Errorf("log lacks %q:\n%s", want, e.logText(t, sb.ID))
				}
				// Resume: a checkpointed sandbox is restored, not re-initialised.
				addrBefore := got.AgentAddr
				res, err := e.m.Resume(context.Background(), team, sb.ID, time.Minute, ResumeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				_, inited := e.agent.Inited(res.AgentAddr)
				if tc.want == sandbox.PauseCheckpointed && inited {
					t.Error("the restored agent was initialised again")
				}
				if tc.want == sandbox.PauseStopped && !inited {
					t.Error("the restarted agent was not initialised")
				}
				if res.AgentAddr == addrBefore || res.State != sandbox.StateRunning {
					t.Errorf("resumed: %+v", res)
				}
				if e.rt.HasCheckpoint(sb.ContainerID) {
					t.Error("checkpoint kept after restore")
				}
			})
		})
	}
}

func TestPauseToDisk(t *testing.T) {
	for _, tc := range []struct {
		name        string
		pauseToDisk bool
		keepMemory  bool
		want        sandbox.PauseMode
	}{
		{"flag off keeps freezing", false, true, sandbox.PauseFrozen},
		{"flag on checkpoints", true, true, sandbox.PauseCheckpointed},
		{"memory false stops", true, false, sandbox.PauseStopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *config) { gvisor(c); c.PauseToDisk = tc.pauseToDisk })
			sb := e.create(t, CreateRequest{})
			if err := e.m.Pause(context.Background(), team, sb.ID, tc.keepMemory); err != nil {
				t.Fatal(err)
			}
			if got := e.state(t, sb.ID); got.PauseMode != tc.want {
				t.Errorf("mode %s, want %s", got.PauseMode, tc.want)
			}
			if got := len(e.stopped()); got != 2 {
				t.Errorf("OnStop called %d times, want twice (before and after the pause)", got)
			}
		})
	}
}

// A failed checkpoint leaves the sandbox paused in a mode that resumes,
// with the reason in its log.
func TestCheckpointFailureFallsBack(t *testing.T) {
	diskFull := sandbox.Wrap(sandbox.KindInternal, errors.New("write pages.img: no space left on device"), "cannot checkpoint")
	for _, tc := range []struct {
		name string
		op   func(e *env, id string) error
		want sandbox.PauseMode
	}{
		{"pause to disk stays frozen", func(e *env, id string) error {
			return e.m.Pause(context.Background(), team, id, true)
		}, sandbox.PauseFrozen},
		{"operator stop of a running sandbox stops it", func(e *env, id string) error {
			_, err := e.m.Stop(context.Background(), team, id)
			return err
		}, sandbox.PauseStopped},
		{"operator stop of a frozen sandbox stops it", func(e *env, id string) error {
			e.m.cfg.PauseToDisk = false
			if err := e.m.Pause(context.Background(), team, id, true); err != nil {
				return err
			}
			_, err := e.m.Stop(context.Background(), team, id)
			return err
		}, sandbox.PauseStopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *config) { gvisor(c); c.PauseToDisk = true })
			sb := e.create(t, CreateRequest{})
			e.rt.Fail("Checkpoint", diskFull)
			if err := tc.op(e, sb.ID); err != nil {
				t.Fatalf("op: %v", err)
			}
			got := e.state(t, sb.ID)
			if got.State != sandbox.StatePaused || got.PauseMode != tc.want {
				t.Fatalf("after a failed checkpoint: %s %s, want paused %s", got.State, got.PauseMode, tc.want)
			}
			if log := e.logText(t, sb.ID); !strings.Contains(log, "checkpoint failed; sandbox paused "+string(tc.want)+" instead") ||
				!strings.Contains(log, "no space left on device") {
				t.Errorf("log does not say why:\n%s", log)
			}
			res, err := e.m.Resume(context.Background(), team, sb.ID, time.Minute, ResumeOptions{})
			if err != nil || res.State != sandbox.StateRunning {
				t.Fatalf("resume after a failed checkpoint: %+v, %v", res, err)
			}
			if c, _ := e.container(t, sb.ContainerID); !c.Running || c.Paused {
				t.Errorf("container after resume: %+v", c)
			}
		})
	}
}

// A checkpoint that cannot be restored starts the sandbox afresh, like a
// stopped one, and says so in its log.
func TestRestoreFailureStartsAfresh(t *testing.T) {
	e := newEnv(t, gvisor)
	sb := e.create(t, CreateRequest{})
	if mode, err := e.m.Stop(context.Background(), team, sb.ID); err != nil || mode != sandbox.PauseCheckpointed {
		t.Fatalf("Stop = %s, %v", mode, err)
	}
	e.rt.Fail("Restore", sandbox.Errorf(sandbox.KindInternal, "restore: bad checkpoint"))
	res, err := e.m.Resume(context.Background(), team, sb.ID, time.Minute, ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, inited := e.agent.Inited(res.AgentAddr); !inited {
		t.Error("agent started afresh but not initialised")
	}
	if log := e.logText(t, sb.ID); !strings.Contains(log, "started afresh") {
		t.Errorf("log:\n%s", log)
	}
}

func TestStopUnderRunc(t *testing.T) {
	e := newEnv(t, nil)
	sb := e.create(t, CreateRequest{})
	mode, err := e.m.Stop(context.Background(), team, sb.ID)
	if err != nil || mode != sandbox.PauseStopped {
		t.Fatalf("Stop = %s, %v; want stopped", mode, err)
	}
	if mode, err := e.m.Stop(context.Background(), team, sb.ID); err != nil || mode != sandbox.PauseStopped {
		t.Errorf("second Stop = %s, %v", mode, err)
	}
	for _, c := range e.rt.Calls() {
		if strings.HasPrefix(c, "Checkpoint") {
			t.Errorf("runc sandbox checkpointed: %v", e.rt.Calls())
		}
	}
}

// Old checkpoints are deleted; the sandbox stays paused (stopped), and
// killing a checkpointed sandbox removes its container with the
// checkpoint.
func TestCheckpointGCAndKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *config) { gvisor(c); c.CheckpointMaxAge = time.Hour })
		old := e.create(t, CreateRequest{})
		gone := e.create(t, CreateRequest{})
		for _, id := range []string{old.ID, gone.ID} {
			if _, err := e.m.Stop(context.Background(), team, id); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.m.Kill(context.Background(), team, gone.ID); err != nil {
			t.Fatal(err)
		}
		if _, ok := e.container(t, gone.ContainerID); ok || e.rt.HasCheckpoint(gone.ContainerID) {
			t.Error("killed sandbox's container or checkpoint remains")
		}
		advance(59 * time.Minute)
		if !e.rt.HasCheckpoint(old.ContainerID) {
			t.Fatal("checkpoint deleted too early")
		}
		advance(2 * time.Minute)
		got := e.state(t, old.ID)
		if e.rt.HasCheckpoint(old.ContainerID) || got.State != sandbox.StatePaused || got.PauseMode != sandbox.PauseStopped {
			t.Errorf("after CheckpointMaxAge: checkpoint %v, %s %s", e.rt.HasCheckpoint(old.ContainerID), got.State, got.PauseMode)
		}
	})
}

// Restarting the server keeps a checkpointed sandbox checkpointed.
func TestCheckpointSurvivesRestart(t *testing.T) {
	e := newEnv(t, gvisor)
	sb := e.create(t, CreateRequest{})
	if _, err := e.m.Stop(context.Background(), team, sb.ID); err != nil {
		t.Fatal(err)
	}
	e.stop()
	e.start(t, gvisor)
	if got := e.state(t, sb.ID); got.PauseMode != sandbox.PauseCheckpointed || !e.rt.HasCheckpoint(sb.ContainerID) {
		t.Errorf("after restart: mode %s, checkpoint %v", got.PauseMode, e.rt.HasCheckpoint(sb.ContainerID))
	}
}
