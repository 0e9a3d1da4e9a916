package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
)

func TestServerStats(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SandboxRuntime = sandbox.RuntimeGVisor })
	ctx := context.Background()
	var ids []string
	for range 3 {
		ids = append(ids, e.create(t, CreateRequest{TeamID: team, Template: "base", Timeout: time.Minute}).ID)
	}
	if err := e.m.Pause(ctx, team, ids[1], true); err != nil {
		t.Fatal(err)
	}
	if mode, err := e.m.Stop(ctx, team, ids[2]); err != nil || mode != sandbox.PauseCheckpointed {
		t.Fatalf("Stop = %q, %v", mode, err)
	}
	st := e.m.ServerStats(ctx)
	if st.Running != 1 || st.Paused[sandbox.PauseFrozen] != 1 || st.Paused[sandbox.PauseCheckpointed] != 1 {
		t.Errorf("counts %+v", st)
	}
	if st.Checkpoints != 1 || st.CheckpointBytes != fake.CheckpointSize || st.CheckpointErr != nil {
		t.Errorf("checkpoints %d, %d bytes, %v; want 1 of %d", st.Checkpoints, st.CheckpointBytes, st.CheckpointErr, fake.CheckpointSize)
	}
	if err := e.m.Kill(ctx, team, ids[2]); err != nil {
		t.Fatal(err)
	}
	if st := e.m.ServerStats(ctx); st.Checkpoints != 0 || st.CheckpointBytes != 0 {
		t.Errorf("after the kill: %d checkpoints, %d bytes", st.Checkpoints, st.CheckpointBytes)
	}
}
