package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Reconcile compares the store with the runtime's containers: it adopts
// containers that match, records what changed behind Warren's back (a
// running sandbox whose container stopped becomes paused, so it can be
// resumed), marks sandboxes whose container vanished as killed, finishes
// off half-made ones, and removes stray containers labelled as Warren's.
// Containers made for the warm pool are adopted into it or removed.
func (m *Manager) Reconcile(ctx context.Context) error {
	m.reconciling.Lock()
	defer m.reconciling.Unlock()
	list, err := m.cfg.Runtime.List(ctx)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	seen := make(map[string]sandbox.Container, len(list))
	for _, c := range list {
		seen[c.ID] = c
	}
	for _, sb := range m.snapshotAll() {
		if sb.State == sandbox.StateKilled {
			continue
		}
		c, ok := seen[sb.ContainerID]
		if ok && sb.State != sandbox.StateCreating && agrees(sb, c) {
			continue
		}
		m.reconcileOne(ctx, sb.ID)
	}
	for _, c := range list {
		if sb, ok := m.cached(c.SandboxID); ok && sb.ContainerID == c.ID && sb.State != sandbox.StateKilled {
			continue
		}
		if c.Labels[sandbox.LabelPool] == "true" {
			m.reconcilePooled(ctx, c)
			continue
		}
		m.removeStray(ctx, c)
	}
	m.restoreFirewall(ctx)
	m.pool.Prune(ctx, seen)
	m.pruneMemory(ctx)
	m.pruneForks(ctx)
	return nil
}

// agrees reports whether a container is in the state its sandbox says.
func agrees(sb sandbox.Sandbox, c sandbox.Container) bool {
	switch {
	case sb.State == sandbox.StateRunning:
		return c.Running && !c.Paused && c.AgentAddr == sb.AgentAddr
	case sb.PauseMode == sandbox.PauseFrozen:
		return c.Running && c.Paused
	default:
		return !c.Running
	}
}

// reconcileOne brings one sandbox in line with its container, inspected
// afresh under the sandbox's lock so that a concurrent operation is never
// undone.
func (m *Manager) reconcileOne(ctx context.Context, id string) {
	defer m.locks.lock(id)()
	sb, ok := m.cached(id)
	if !ok || sb.State == sandbox.StateKilled {
		return
	}
	log := m.log.With(logkey.Sandbox, id, logkey.Container, sb.ContainerID)
	if sb.State == sandbox.StateCreating {
		// Creation holds the lock throughout, so this one was interrupted.
		log.Warn("removing half-made sandbox")
		m.abandon(ctx, sb)
		return
	}
	c, err := m.cfg.Runtime.Inspect(ctx, sb.ContainerID)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		log.Warn("sandbox container vanished")
		m.markVanished(ctx, sb)
		return
	}
	if err != nil {
		log.Warn("cannot inspect sandbox container", "err", err)
		return
	}
	if agrees(sb, c) {
		return
	}
	before := sb
	switch {
	case sb.State == sandbox.StateRunning && c.Running && !c.Paused:
		sb.AgentAddr = c.AgentAddr // adopted; the engine may have moved the port
		if err := m.applyEgress(ctx, sb, c.IP); err != nil {
			log.Error("cannot apply egress rules to adopted sandbox", "err", err)
		}
	case sb.State == sandbox.StateRunning:
		now := time.Now().UTC()
		sb.State, sb.PausedAt, sb.Remaining = sandbox.StatePaused, now, max(sb.EndAt.Sub(now), 0)
		sb.PauseMode, sb.AgentAddr = sandbox.PauseStopped, ""
		if c.Paused {
			sb.PauseMode, sb.AgentAddr = sandbox.PauseFrozen, c.AgentAddr
		} else {
			m.removeEgress(ctx, id)
		}
	case sb.PauseMode == sandbox.PauseFrozen && c.Running:
		if err := m.caps.freeze(ctx, c.ID); err != nil {
			log.Warn("cannot re-freeze sandbox", "err", err)
			return
		}
	case sb.PauseMode == sandbox.PauseFrozen:
		sb.PauseMode, sb.AgentAddr = sandbox.PauseStopped, ""
		m.removeEgress(ctx, id)
	default: // stopped, but the container runs
		if err := m.cfg.Runtime.Stop(ctx, c.ID); err != nil {
			log.Warn("cannot stop paused sandbox", "err", err)
		}
		return
	}
	stopped := before.State == sandbox.StateRunning && sb.State != sandbox.StateRunning
	var evs []sandbox.Recorded
	if stopped {
		evs = m.tell(ctx, sb, sandbox.EventPaused, map[string]any{"pause_mode": string(sb.PauseMode)})
	}
	if err := m.save(ctx, sb, evs...); err != nil {
		log.Error("cannot save reconciled sandbox", "err", err)
		return
	}
	if stopped {
		m.notifyStop(id)
		m.event(ctx, id, "warn", "sandbox found stopped; now paused", "mode", string(sb.PauseMode), "ended", c.Ended)
		log.Warn("sandbox found stopped; now paused", "mode", sb.PauseMode, "ended", c.Ended)
		return
	}
	log.Info("sandbox reconciled", "state", sb.State, "mode", sb.PauseMode)
}

// markVanished records that a sandbox's container is gone.
func (m *Manager) markVanished(ctx context.Context, sb sandbox.Sandbox) {
	m.removeEgress(ctx, sb.ID)
	sb.State, sb.PauseMode, sb.AgentAddr = sandbox.StateKilled, "", ""
	sb.KilledAt = time.Now().UTC()
	if err := m.save(ctx, sb, m.tell(ctx, sb, sandbox.EventKilled, nil)...); err != nil {
		m.log.Error("cannot save vanished sandbox", logkey.Sandbox, sb.ID, "err", err)
		return
	}
	m.notifyStop(sb.ID)
	m.releaseImage(ctx, sb.Image)
	m.event(ctx, sb.ID, "warn", "sandbox container vanished")
}

// removeStray removes a labelled container no live sandbox owns.
func (m *Manager) removeStray(ctx context.Context, c sandbox.Container) {
	if c.SandboxID != "" {
		defer m.locks.lock(c.SandboxID)()
		if sb, ok := m.cached(c.SandboxID); ok && sb.ContainerID == c.ID && sb.State != sandbox.StateKilled {
			return
		}
	}
	m.log.Warn("removing stray container", logkey.Container, c.ID, logkey.Sandbox, c.SandboxID)
	if err := m.cfg.Runtime.Remove(ctx, c.ID); err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
		m.log.Warn("cannot remove stray container", logkey.Container, c.ID, "err", err)
	}
}
