package lifecycle

import (
	"context"

	"github.com/warrenhq/warren/internal/sandbox"
)

// ServerStats sums up the server's live sandboxes, for its metrics.
type ServerStats struct {
	Running   int
	Paused    map[sandbox.PauseMode]int
	PoolReady int // started containers waiting in the warm pool
	// Checkpoints and CheckpointBytes count the checkpoints of checkpointed
	// sandboxes and the disk they use; CheckpointErr says why the size
	// could not be measured (the runtime cannot, or not from here).
	Checkpoints     int
	CheckpointBytes int64
	CheckpointErr   error
}

// checkpointSizer is a Runtime that can measure containers' checkpoints.
type checkpointSizer interface {
	CheckpointsSize(ctx context.Context, containerIDs []string) (int64, error)
}

// ServerStats counts the live sandboxes by state and pause mode, and
// measures the checkpoints on disk.
func (m *Manager) ServerStats(ctx context.Context) ServerStats {
	st := ServerStats{Paused: map[sandbox.PauseMode]int{}, PoolReady: m.pool.len()}
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
	if sizer, ok := m.cfg.Runtime.(checkpointSizer); ok {
		st.CheckpointBytes, st.CheckpointErr = sizer.CheckpointsSize(ctx, checkpointed)
	} else if len(checkpointed) > 0 {
		st.CheckpointErr = sandbox.Errorf(sandbox.KindUnavailable, "the runtime cannot measure checkpoints")
	}
	return st
}
