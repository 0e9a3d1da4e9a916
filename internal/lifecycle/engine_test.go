package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
)

// bareEngine is an engine with only what the manager requires (Containers
// and Images): the fake with every optional capability hidden.
type bareEngine struct{ sandbox.Runtime }

// checkpointingEngine is a bare engine that can checkpoint, but not freeze.
type checkpointingEngine struct {
	sandbox.Runtime
	sandbox.Checkpointer
}

// TestBareEngine: on an engine without optional capabilities a pause that
// keeps memory stops the sandbox, which resumes by rebooting; snapshots
// and forks are refused as unavailable and change nothing; a log holds
// the lifecycle events; samples are the agent's.
func TestBareEngine(t *testing.T) {
	var agent *diskAgent
	var rt *fake.Runtime
	e := newEnv(t, func(c *config) {
		rt = c.Runtime.(*fake.Runtime)
		c.Runtime = bareEngine{rt}
		agent = &diskAgent{Agent: c.Agent.(*fake.Agent)}
		c.Agent = agent
		c.MetricsInterval = time.Hour // samples are taken by hand
	})
	ctx := context.Background()
	sb := e.create(t, CreateRequest{})

	agent.set(3<<30, 8<<30, nil)
	e.m.sampleMetrics(ctx)
	got, err := e.m.Metrics(ctx, team, sb.ID, time.Time{}, time.Time{})
	if err != nil || len(got) != 1 || got[0].DiskUsed != 3<<30 || got[0].DiskTotal != 8<<30 {
		t.Errorf("samples %+v, %v; want one with the agent's 3 GiB of 8", got, err)
	}

	_, err = e.m.Snapshot(ctx, team, sb.ID, "", MemoryIfPossible)
	wantKind(t, "snapshot", err, sandbox.KindUnavailable)
	_, err = e.m.Fork(ctx, team, sb.ID, time.Minute, 1)
	wantKind(t, "fork", err, sandbox.KindUnavailable)
	if n := len(rt.Images()); n != 2 {
		t.Errorf("%d images after refused snapshot and fork, want the 2 the fake started with", n)
	}

	if err := e.m.Pause(ctx, team, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	if got := e.state(t, sb.ID); got.PauseMode != sandbox.PauseStopped {
		t.Errorf("paused %s, want stopped", got.PauseMode)
	}
	if c, _ := e.container(t, sb.ContainerID); c.Running {
		t.Error("container still running")
	}
	if _, err := e.m.Resume(ctx, team, sb.ID, time.Minute, ResumeOptions{}); err != nil {
		t.Fatal(err)
	}
	if c, _ := e.container(t, sb.ContainerID); !c.Running || c.Paused {
		t.Errorf("after resume: running %v paused %v, want running", c.Running, c.Paused)
	}

	rt.WriteLog(sb.ContainerID, sandbox.LogLine{Time: time.Now(), Text: "agent started"})
	logs, err := e.m.Logs(ctx, team, sb.ID, sandbox.LogQuery{})
	if err != nil || len(logs) == 0 {
		t.Fatalf("logs %v, %v; want the lifecycle events", logs, err)
	}
	for _, l := range logs {
		if l.Fields["source"] == "agent" {
			t.Errorf("an agent line %q from an engine that keeps no log", l.Message)
		}
	}
}

// TestCheckpointWithoutFreezer: on an engine that checkpoints but cannot
// freeze, a gVisor sandbox's pause that keeps memory checkpoints it.
func TestCheckpointWithoutFreezer(t *testing.T) {
	e := newEnv(t, func(c *config) {
		rt := c.Runtime.(*fake.Runtime)
		c.Runtime = checkpointingEngine{rt, rt}
		gvisor(c)
	})
	ctx := context.Background()
	sb := e.create(t, CreateRequest{})
	if err := e.m.Pause(ctx, team, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	if got := e.state(t, sb.ID); got.PauseMode != sandbox.PauseCheckpointed {
		t.Errorf("paused %s, want checkpointed", got.PauseMode)
	}
}
