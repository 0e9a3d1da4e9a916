package lifecycle

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
)

func TestServerStats(t *testing.T) {
	e := newEnv(t, func(c *config) { c.SandboxRuntime = sandbox.RuntimeGVisor })
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

// diskAgent is a fake agent that also answers Metrics with disk figures.
type diskAgent struct {
	*fake.Agent

	mu         sync.Mutex // guards the fields below
	used, size int64
	err        error
	asked      []string // "addr token" of each Metrics call
}

func (a *diskAgent) Metrics(ctx context.Context, addr, accessToken string) (sandbox.Stats, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, addr+" "+accessToken)
	return sandbox.Stats{Time: time.Now(), DiskUsed: a.used, DiskTotal: a.size}, a.err
}

func (a *diskAgent) set(used, size int64, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.used, a.size, a.err = used, size, err
}

// TestSampleDisk checks that a running sandbox's samples carry the disk
// figures its agent reports, bounded by the size the runtime enforces (the
// fake runtime's 10 GiB), and that a paused sandbox's agent is not asked.
func TestSampleDisk(t *testing.T) {
	const gib = 1 << 30
	var agent *diskAgent
	e := newEnv(t, func(c *config) {
		agent = &diskAgent{Agent: c.Agent.(*fake.Agent)}
		c.Agent = agent
		c.MetricsInterval = time.Hour // samples are taken by hand
	})
	ctx := context.Background()
	sb := e.create(t, CreateRequest{Template: "base", Secure: true})
	tests := []struct {
		name            string
		used, size      int64
		err             error
		wantUsed, wantT int64
	}{
		{"agent's figures", 1 * gib, 8 * gib, nil, 1 * gib, 8 * gib},
		{"bounded by the enforced size", 3 * gib, 100 * gib, nil, 3 * gib, 10 * gib},
		{"used capped at the bound", 50 * gib, 100 * gib, nil, 10 * gib, 10 * gib},
		{"agent fails: runtime's figures", 0, 0, errors.New("agent down"), 100 << 20, 10 * gib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent.set(tt.used, tt.size, tt.err)
			since := time.Now()
			e.m.sampleMetrics(ctx)
			got, err := e.m.Metrics(ctx, team, sb.ID, since, time.Time{})
			if err != nil || len(got) != 1 {
				t.Fatalf("samples %v, %v; want one", got, err)
			}
			if got[0].DiskUsed != tt.wantUsed || got[0].DiskTotal != tt.wantT {
				t.Errorf("disk %d of %d, want %d of %d", got[0].DiskUsed, got[0].DiskTotal, tt.wantUsed, tt.wantT)
			}
		})
	}
	want := sb.AgentAddr + " " + sb.EnvdAccessToken
	if sb.EnvdAccessToken == "" || len(agent.asked) == 0 || agent.asked[0] != want {
		t.Errorf("agent asked as %q, want %q", agent.asked, want)
	}

	if err := e.m.Pause(ctx, team, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	asked := len(agent.asked)
	e.m.sampleMetrics(ctx)
	if diff := cmp.Diff(asked, len(agent.asked)); diff != "" {
		t.Errorf("a paused sandbox's agent was asked (-before +after):\n%s", diff)
	}
}
