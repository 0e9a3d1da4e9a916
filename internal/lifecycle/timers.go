package lifecycle

import (
	"context"
	"slices"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// sweep runs the timers: TTL expiry, frozen → stopped (or checkpointed)
// demotion by age and by cap, removal of long-stopped sandboxes, deletion
// of old checkpoints and of old killed records.
func (m *Manager) sweep(ctx context.Context) {
	now := time.Now()
	var frozen []sandbox.Sandbox
	for _, sb := range m.snapshotAll() {
		switch {
		case sb.State == sandbox.StateRunning && !now.Before(sb.EndAt):
			m.expire(ctx, sb.ID)
		case sb.State == sandbox.StatePaused && sb.PauseMode == sandbox.PauseFrozen:
			if m.cfg.FreezeMaxAge > 0 && now.Sub(sb.PausedAt) >= m.cfg.FreezeMaxAge {
				m.demote(ctx, sb.ID, "frozen too long")
			} else {
				frozen = append(frozen, sb)
			}
		case sb.State == sandbox.StatePaused:
			if m.cfg.StoppedMaxAge > 0 && now.Sub(sb.PausedAt) >= m.cfg.StoppedMaxAge {
				m.collect(ctx, sb.ID)
			} else if sb.PauseMode == sandbox.PauseCheckpointed && m.cfg.CheckpointMaxAge > 0 &&
				now.Sub(sb.PausedAt) >= m.cfg.CheckpointMaxAge {
				m.dropCheckpoint(ctx, sb.ID)
			}
		case sb.State == sandbox.StateKilled && now.Sub(sb.KilledAt) >= m.cfg.KilledRetention:
			if err := m.forget(ctx, sb.ID); err != nil {
				m.log.Warn("cannot delete killed sandbox", logkey.Sandbox, sb.ID, "err", err)
			}
		}
	}
	if m.cfg.MaxFrozen >= 0 && len(frozen) > m.cfg.MaxFrozen {
		slices.SortFunc(frozen, func(a, b sandbox.Sandbox) int { return a.PausedAt.Compare(b.PausedAt) })
		for _, sb := range frozen[:len(frozen)-m.cfg.MaxFrozen] {
			m.demote(ctx, sb.ID, "too many frozen sandboxes")
		}
	}
}

// expire ends a running sandbox whose time is up: paused when its
// lifecycle says so, killed otherwise.
func (m *Manager) expire(ctx context.Context, id string) {
	defer m.locks.lock(id)()
	sb, ok := m.cached(id)
	if !ok || sb.State != sandbox.StateRunning || time.Now().Before(sb.EndAt) {
		return
	}
	if err := m.timeUp(ctx, sb); err != nil {
		m.log.Error("cannot end timed-out sandbox", logkey.Sandbox, id, "err", err)
	}
}

// timeUp does what running sb's lifecycle says at its timeout: pause, or
// kill. The caller holds its lock.
func (m *Manager) timeUp(ctx context.Context, sb sandbox.Sandbox) error {
	if sb.Lifecycle.OnTimeout == sandbox.TimeoutPause {
		return m.pause(ctx, sb, sb.Lifecycle.KeepMemory, "timeout")
	}
	return m.kill(ctx, sb, "timeout")
}

// demote frees a frozen sandbox's memory; it stays paused, checkpointed
// under gVisor (processes and memory kept on disk), else stopped.
func (m *Manager) demote(ctx context.Context, id, reason string) {
	defer m.locks.lock(id)()
	sb, ok := m.cached(id)
	if !ok || sb.State != sandbox.StatePaused || sb.PauseMode != sandbox.PauseFrozen {
		return
	}
	if _, err := m.demoteLocked(ctx, sb, reason); err != nil {
		m.log.Error("cannot demote frozen sandbox", logkey.Sandbox, id, "err", err)
	}
}

// collect removes a sandbox that has been paused (stopped or
// checkpointed) too long; removing its container deletes its checkpoint.
func (m *Manager) collect(ctx context.Context, id string) {
	defer m.locks.lock(id)()
	sb, ok := m.cached(id)
	if !ok || sb.State != sandbox.StatePaused || sb.PauseMode == sandbox.PauseFrozen {
		return
	}
	if err := m.kill(ctx, sb, "paused too long"); err != nil {
		m.log.Error("cannot remove long-paused sandbox", logkey.Sandbox, id, "err", err)
	}
}
