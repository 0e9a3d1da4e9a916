package lifecycle

import (
	"context"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Pause to disk. Under gVisor a sandbox's processes and memory can be
// checkpointed to disk and its container stopped (PauseCheckpointed): it
// then holds no RAM, and resuming restores it as it was, agent included,
// without re-initialising anything. Frozen sandboxes are demoted this way
// (by age, by the cap on frozen ones, or by an operator's Stop); a pause
// that keeps memory goes straight there when Settings.PauseToDisk is set.
// Under runc the same demotion stops the container (PauseStopped).
//
// A checkpoint that fails never loses the sandbox: it stays paused in a
// mode that resumes (frozen, or stopped when its memory is gone or had to
// be freed), and its log says why.

// checkpointer returns the runtime's checkpointing side when sb can be
// checkpointed.
func (m *Manager) checkpointer(sb sandbox.Sandbox) (sandbox.Checkpointer, bool) {
	cp := m.caps.checkpointer
	return cp, cp != nil && sb.Runtime == sandbox.RuntimeGVisor
}

// Stop moves a sandbox to disk, freeing its memory: a running or frozen
// gVisor sandbox is checkpointed, any other is stopped. It returns the mode
// the sandbox is paused in; one already on disk is left as it is. It is an
// operator's command (warren sandbox stop): E2B's API has no equivalent.
func (m *Manager) Stop(ctx context.Context, teamID, id string) (sandbox.PauseMode, error) {
	ctx, cancel := engineWork(ctx, changeLimit)
	defer cancel()
	defer m.locks.lock(id)()
	sb, err := m.live(teamID, id)
	if err != nil {
		return "", err
	}
	switch {
	case sb.State == sandbox.StatePaused && sb.PauseMode != sandbox.PauseFrozen:
		return sb.PauseMode, nil
	case sb.State == sandbox.StatePaused:
		sb, err = m.demoteLocked(ctx, sb, "stopped by operator")
	default:
		if _, ok := m.checkpointer(sb); ok {
			done := m.beginPause(sb.ID)
			sb, err = m.toDisk(ctx, sb, sandbox.PauseStopped, "stopped by operator")
			done()
		} else {
			err = m.pause(ctx, sb, false, "stopped by operator")
			sb, _ = m.cached(id)
		}
	}
	if err != nil {
		return "", err
	}
	return sb.PauseMode, nil
}

// demoteLocked frees a frozen sandbox's memory: checkpointed when it can
// be, else stopped. The caller holds its lock.
func (m *Manager) demoteLocked(ctx context.Context, sb sandbox.Sandbox, reason string) (sandbox.Sandbox, error) {
	if _, ok := m.checkpointer(sb); ok {
		return m.toDisk(ctx, sb, sandbox.PauseStopped, reason)
	}
	if err := m.cfg.Runtime.Stop(ctx, sb.ContainerID); err != nil {
		return sb, sandbox.Wrap(sandbox.KindInternal, err, "failed to stop sandbox")
	}
	return m.pausedOnDisk(ctx, sb, sandbox.PauseStopped, reason)
}

// toDisk checkpoints sb, running or frozen, and records it paused
// (checkpointed). When the checkpoint fails sb is paused in fallback
// instead (frozen or stopped; stopped whenever its memory is already
// gone), with the reason in its log. An error means it could be put in
// no such mode and is as it was.
func (m *Manager) toDisk(ctx context.Context, sb sandbox.Sandbox, fallback sandbox.PauseMode, reason string) (sandbox.Sandbox, error) {
	cp, _ := m.checkpointer(sb)
	start := time.Now()
	err := cp.Checkpoint(ctx, sb.ContainerID)
	if err == nil {
		m.log.Info("sandbox checkpointed", logkey.Sandbox, sb.ID, "took", time.Since(start).Round(time.Millisecond))
		return m.pausedOnDisk(ctx, sb, sandbox.PauseCheckpointed, reason)
	}
	m.log.Warn("checkpoint failed", logkey.Sandbox, sb.ID, logkey.Container, sb.ContainerID, "err", err)
	ctx = context.WithoutCancel(ctx)
	// A partial checkpoint must never be restored later.
	if derr := cp.DeleteCheckpoint(ctx, sb.ContainerID); derr != nil && sandbox.KindOf(derr) != sandbox.KindNotFound {
		m.log.Warn("cannot delete a failed checkpoint", logkey.Sandbox, sb.ID, "err", derr)
	}
	mode, ferr := m.fallBack(ctx, sb, fallback)
	if ferr != nil {
		m.event(ctx, sb.ID, "error", "checkpoint failed", "reason", reason, "error", err.Error())
		return sb, sandbox.Wrap(sandbox.KindInternal, ferr, "failed to pause sandbox")
	}
	m.event(ctx, sb.ID, "warn", "checkpoint failed; sandbox paused "+string(mode)+" instead",
		"reason", reason, "error", err.Error())
	if mode == sandbox.PauseFrozen {
		return m.pausedFrozen(ctx, sb, reason)
	}
	return m.pausedOnDisk(ctx, sb, mode, reason)
}

// fallBack puts sb's container, after a failed checkpoint, in the state
// of mode want, or stopped when its processes are gone.
func (m *Manager) fallBack(ctx context.Context, sb sandbox.Sandbox, want sandbox.PauseMode) (sandbox.PauseMode, error) {
	c, err := m.cfg.Runtime.Inspect(ctx, sb.ContainerID)
	if err != nil {
		return "", err
	}
	switch {
	case !c.Running:
		return sandbox.PauseStopped, nil
	case want == sandbox.PauseFrozen && c.Paused:
		return sandbox.PauseFrozen, nil
	case want == sandbox.PauseFrozen:
		if err := m.caps.freeze(ctx, c.ID); err == nil {
			return sandbox.PauseFrozen, nil
		}
	}
	if err := m.cfg.Runtime.Stop(ctx, c.ID); err != nil {
		return "", err
	}
	return sandbox.PauseStopped, nil
}

// pausedOnDisk records sb, whose container no longer runs, as paused in
// mode (stopped or checkpointed).
func (m *Manager) pausedOnDisk(ctx context.Context, sb sandbox.Sandbox, mode sandbox.PauseMode, reason string) (sandbox.Sandbox, error) {
	wasRunning := sb.State == sandbox.StateRunning
	if wasRunning {
		now := time.Now().UTC()
		sb.PausedAt, sb.Remaining = now, max(sb.EndAt.Sub(now), 0)
	}
	sb.State, sb.PauseMode, sb.AgentAddr = sandbox.StatePaused, mode, ""
	m.removeEgress(ctx, sb.ID) // the engine may give its address to another
	var evs []sandbox.Recorded
	if wasRunning {
		evs = m.tell(ctx, sb, sandbox.EventPaused, map[string]any{"pause_mode": string(mode)})
	}
	if err := m.save(ctx, sb, evs...); err != nil {
		return sb, err
	}
	if wasRunning {
		m.notifyStop(sb.ID)
		m.announce(ctx, sb.ID, "sandbox paused", "mode", string(mode), "reason", reason)
	} else {
		m.announce(ctx, sb.ID, "sandbox demoted to "+string(mode), "reason", reason)
	}
	return sb, nil
}

// pausedFrozen records sb, whose container is frozen, as paused (frozen).
func (m *Manager) pausedFrozen(ctx context.Context, sb sandbox.Sandbox, reason string) (sandbox.Sandbox, error) {
	if sb.State == sandbox.StatePaused {
		return sb, nil // it was frozen already
	}
	now := time.Now().UTC()
	sb.State, sb.PauseMode, sb.PausedAt = sandbox.StatePaused, sandbox.PauseFrozen, now
	sb.Remaining = max(sb.EndAt.Sub(now), 0)
	if err := m.save(ctx, sb, m.tell(ctx, sb, sandbox.EventPaused, map[string]any{"pause_mode": string(sandbox.PauseFrozen)})...); err != nil {
		return sb, err
	}
	m.notifyStop(sb.ID)
	m.event(ctx, sb.ID, "info", "sandbox paused", "mode", string(sandbox.PauseFrozen), "reason", reason)
	return sb, nil
}

// restore brings a checkpointed sandbox back with its processes and
// memory; its agent keeps its configuration, so it is not re-initialised.
// When the checkpoint cannot be restored, the sandbox starts afresh as a
// stopped one would, and its log says why. It returns the container's
// new address and IP (restoreFresh true when it started afresh).
func (m *Manager) restore(ctx context.Context, sb sandbox.Sandbox) (c sandbox.Container, fresh bool, err error) {
	cp, ok := m.checkpointer(sb)
	if !ok {
		c, err = m.cfg.Runtime.Start(ctx, sb.ContainerID)
		return c, true, err
	}
	start := time.Now()
	c, err = cp.Restore(ctx, sb.ContainerID)
	if err == nil {
		m.log.Info("sandbox restored", logkey.Sandbox, sb.ID, "took", time.Since(start).Round(time.Millisecond))
		return c, false, nil
	}
	if _, ierr := m.cfg.Runtime.Inspect(ctx, sb.ContainerID); sandbox.KindOf(ierr) == sandbox.KindNotFound {
		return c, false, ierr
	}
	m.log.Warn("cannot restore checkpoint; starting afresh", logkey.Sandbox, sb.ID, "err", err)
	m.event(ctx, sb.ID, "warn", "checkpoint could not be restored; sandbox started afresh (memory lost)", "error", err.Error())
	if derr := cp.DeleteCheckpoint(ctx, sb.ContainerID); derr != nil {
		m.log.Warn("cannot delete checkpoint", logkey.Sandbox, sb.ID, "err", derr)
	}
	c, err = m.cfg.Runtime.Start(ctx, sb.ContainerID)
	return c, true, err
}

// dropCheckpoint turns a sandbox checkpointed for longer than
// CheckpointMaxAge into a stopped one, freeing the checkpoint's disk; its
// filesystem stays.
func (m *Manager) dropCheckpoint(ctx context.Context, id string) {
	defer m.locks.lock(id)()
	sb, ok := m.cached(id)
	if !ok || sb.State != sandbox.StatePaused || sb.PauseMode != sandbox.PauseCheckpointed {
		return
	}
	if cp := m.caps.checkpointer; cp != nil {
		if err := cp.DeleteCheckpoint(ctx, sb.ContainerID); err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
			m.log.Warn("cannot delete old checkpoint", logkey.Sandbox, id, "err", err)
			return
		}
	}
	sb.PauseMode = sandbox.PauseStopped
	if err := m.save(ctx, sb); err != nil {
		m.log.Error("cannot save sandbox", logkey.Sandbox, id, "err", err)
		return
	}
	m.announce(ctx, id, "old checkpoint deleted; sandbox demoted to stopped (memory lost)")
}
