package lifecycle

import (
	"context"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/phases"
	"github.com/warrenhq/warren/internal/sandbox"
)

// ServerStats sums up the server's live sandboxes, for its metrics.
type ServerStats struct {
	Running int
	Paused  map[sandbox.PauseMode]int
	// PoolReady counts the started containers waiting in the warm pool,
	// and PoolSize how many it keeps, by template, for every template the
	// pool can serve.
	PoolReady, PoolSize map[string]int
	// PoolMemoryMB is, by template, the memory the budget counts for the
	// containers beyond the template's floor that wait in the pool (at
	// warmpool.ContainerMB each, more for a code interpreter), and PoolBudgetMB the budget
	// (Settings.WarmPoolMemoryMB) that auto-sized pools share.
	PoolMemoryMB map[string]int
	PoolBudgetMB int
	// Checkpoints and CheckpointBytes count the checkpoints of checkpointed
	// sandboxes and the disk they use; CheckpointErr says why the size
	// could not be measured (the runtime cannot, or not from here).
	Checkpoints     int
	CheckpointBytes int64
	CheckpointErr   error
	// CreatePhases are the histograms of the steps of the creates that
	// succeeded, by path: "cold" (made its container) or "pool".
	CreatePhases []phases.Series
}

// ServerStats counts the live sandboxes by state and pause mode, and
// measures the checkpoints on disk.
func (m *Manager) ServerStats(ctx context.Context) ServerStats {
	pool := m.pool.Stats()
	st := ServerStats{Paused: map[sandbox.PauseMode]int{}, PoolReady: pool.Ready, PoolSize: pool.Size,
		PoolMemoryMB: pool.MemoryMB, PoolBudgetMB: pool.BudgetMB}
	var checkpointed []string
	for _, sb := range m.snapshotAll() {
		switch sb.State {
		case sandbox.StateRunning:
			st.Running++
		case sandbox.StatePaused:
			st.Paused[sb.PauseMode]++
			if sb.PauseMode == sandbox.PauseCheckpointed {
				checkpointed = append(checkpointed, sb.ContainerID)
			}
		}
	}
	st.Checkpoints = len(checkpointed)
	st.CreatePhases = m.createPhases.Snapshot()
	if cp := m.caps.checkpointer; cp != nil {
		st.CheckpointBytes, st.CheckpointErr = cp.CheckpointsSize(ctx, checkpointed)
	} else if len(checkpointed) > 0 {
		st.CheckpointErr = sandbox.Errorf(sandbox.KindUnavailable, "the runtime cannot measure checkpoints")
	}
	return st
}

// agentMetrics is an Agent that can read a sandbox's resource use from
// inside it; agentclient.Client is one.
type agentMetrics interface {
	Metrics(ctx context.Context, addr, accessToken string) (sandbox.Stats, error)
}

// agentMetricsTimeout bounds one agent's answer, so that a stuck agent
// delays the other sandboxes' samples by no more than this.
const agentMetricsTimeout = 2 * time.Second

// sampleMetrics records one resource sample of every running sandbox. A
// paused sandbox has none: its processes use nothing, and a frozen agent
// would not answer.
func (m *Manager) sampleMetrics(ctx context.Context) {
	for _, sb := range m.snapshotAll() {
		if sb.State != sandbox.StateRunning {
			continue
		}
		st, err := m.sample(ctx, sb)
		if err != nil {
			m.log.Debug("cannot sample sandbox", logkey.Sandbox, sb.ID, "err", err)
			continue
		}
		if st.Time.IsZero() {
			st.Time = time.Now()
		}
		st.Time = st.Time.UTC()
		if err := m.cfg.Store.AddMetric(ctx, sb.ID, st, m.cfg.MetricsHistory); err != nil {
			m.log.Warn("cannot store metric", logkey.Sandbox, sb.ID, "err", err)
		}
	}
}

// sample is one resource sample of running sb: the engine's, with the disk
// figures the agent gives, or the agent's alone on an engine that cannot
// sample containers (no sandbox.StatsReader).
func (m *Manager) sample(ctx context.Context, sb sandbox.Sandbox) (sandbox.Stats, error) {
	if m.caps.stats == nil {
		agent, ok := m.cfg.Agent.(agentMetrics)
		if !ok {
			return sandbox.Stats{}, sandbox.Errorf(sandbox.KindUnavailable, "neither the engine nor the agent can sample sandboxes")
		}
		ctx, cancel := context.WithTimeout(ctx, agentMetricsTimeout)
		defer cancel()
		return agent.Metrics(ctx, sb.AgentAddr, sb.EnvdAccessToken)
	}
	st, err := m.caps.stats.Stats(ctx, sb.ContainerID)
	if err != nil {
		return st, err
	}
	m.sampleDisk(ctx, sb, &st)
	return st, nil
}

// sampleDisk fills in st's disk figures from the sandbox's agent: its root
// filesystem as the sandbox sees it (statfs of /, what df shows inside).
// The runtime's DiskTotal, when set, is the size it enforces on the
// sandbox's disk; it bounds the total in case the filesystem does not
// report the limit itself. When the agent cannot tell, st keeps the
// runtime's figures.
func (m *Manager) sampleDisk(ctx context.Context, sb sandbox.Sandbox, st *sandbox.Stats) {
	agent, ok := m.cfg.Agent.(agentMetrics)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, agentMetricsTimeout)
	defer cancel()
	in, err := agent.Metrics(ctx, sb.AgentAddr, sb.EnvdAccessToken)
	if err != nil || in.DiskTotal <= 0 {
		m.log.Debug("cannot read the sandbox's disk use", logkey.Sandbox, sb.ID, "err", err)
		return
	}
	total := in.DiskTotal
	if st.DiskTotal > 0 {
		total = min(total, st.DiskTotal)
	}
	st.DiskTotal, st.DiskUsed = total, min(in.DiskUsed, total)
}
