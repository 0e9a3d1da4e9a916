package lifecycle

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// live returns the team's sandbox id if it is running or paused; anything
// else (unknown, another team's, creating, killed) is KindNotFound.
func (m *Manager) live(teamID, id string) (sandbox.Sandbox, error) {
	sb, ok := m.cached(id)
	if !ok || sb.TeamID != teamID || (sb.State != sandbox.StateRunning && sb.State != sandbox.StatePaused) {
		return sandbox.Sandbox{}, sandbox.Errorf(sandbox.KindNotFound, "sandbox '%s' not found", id)
	}
	return sb, nil
}

// Kill removes a running or paused sandbox. While other teams create,
// the removal takes a slot of the team's share of the engine
// (warmpool.Pool.AdmitRemoval): a burst's kills are late rather than
// another team's create. A sandbox that is not there is answered at once.
func (m *Manager) Kill(ctx context.Context, teamID, id string) error {
	if _, err := m.live(teamID, id); err != nil {
		return err
	}
	ctx, cancel := engineWork(ctx, changeLimit)
	defer cancel()
	defer m.pool.AdmitRemoval(ctx, teamID)()
	defer m.locks.lock(id)()
	sb, err := m.live(teamID, id)
	if err != nil {
		return err
	}
	return m.kill(ctx, sb, "killed")
}

// kill marks sb killed, then removes its container. The record goes first
// so that the API never reports a sandbox whose container is already gone;
// a container that cannot be removed now is a stray that reconcile removes.
// The caller holds its lock.
func (m *Manager) kill(ctx context.Context, sb sandbox.Sandbox, reason string) error {
	containerID := sb.ContainerID
	sb.State, sb.PauseMode, sb.AgentAddr = sandbox.StateKilled, "", ""
	sb.KilledAt = time.Now().UTC()
	if err := m.save(ctx, sb, m.tell(ctx, sb, sandbox.EventKilled, nil)...); err != nil {
		return err
	}
	m.notifyStop(sb.ID)
	if err := m.cfg.Runtime.Remove(ctx, containerID); err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
		m.log.Warn("cannot remove killed sandbox's container; reconcile will retry", logkey.Sandbox, sb.ID, logkey.Container, containerID, "err", err)
	}
	m.removeEgress(ctx, sb.ID)
	m.releaseImage(ctx, sb.Image)
	m.announce(ctx, sb.ID, "sandbox killed", "reason", reason)
	return nil
}

// SetTimeout sets a running sandbox's end to now + d; it may shorten it.
// A d of 0 ends it at once, as its timeout would: killed, or paused when
// its lifecycle says so (E2B's API takes 0). A paused sandbox is
// KindNotFound, as E2B answers.
func (m *Manager) SetTimeout(ctx context.Context, teamID, id string, d time.Duration) error {
	if d == 0 {
		return m.endNow(ctx, teamID, id)
	}
	return m.setEnd(ctx, teamID, id, d, false)
}

// endNow does to a running sandbox what its timeout would do, now.
func (m *Manager) endNow(ctx context.Context, teamID, id string) error {
	ctx, cancel := engineWork(ctx, changeLimit)
	defer cancel()
	defer m.locks.lock(id)()
	sb, err := m.live(teamID, id)
	if err != nil {
		return err
	}
	if sb.State != sandbox.StateRunning {
		return sandbox.Errorf(sandbox.KindNotFound, "sandbox '%s' is not running", id)
	}
	sb.EndAt = time.Now().UTC()
	return m.timeUp(ctx, sb)
}

// Refresh extends a running sandbox's life to at least now + d.
func (m *Manager) Refresh(ctx context.Context, teamID, id string, d time.Duration) error {
	return m.setEnd(ctx, teamID, id, d, true)
}

// setEnd sets a running sandbox's end to now + d, or, when onlyLater,
// leaves it if it is already later.
func (m *Manager) setEnd(ctx context.Context, teamID, id string, d time.Duration, onlyLater bool) error {
	if err := m.checkTimeout(d); err != nil {
		return err
	}
	defer m.locks.lock(id)()
	sb, err := m.live(teamID, id)
	if err != nil {
		return err
	}
	if sb.State != sandbox.StateRunning {
		return sandbox.Errorf(sandbox.KindNotFound, "sandbox '%s' is not running", id)
	}
	end := time.Now().UTC().Add(d)
	if onlyLater && !end.After(sb.EndAt) {
		return nil
	}
	sb.EndAt = end
	return m.save(ctx, sb, m.tell(ctx, sb, sandbox.EventUpdated, map[string]any{"set_timeout": end.Format(time.RFC3339)})...)
}

// Pause pauses a running sandbox: frozen when keepMemory (checkpointed
// when Settings.PauseToDisk is set and it runs under gVisor), else stopped.
// An already paused sandbox is KindConflict.
func (m *Manager) Pause(ctx context.Context, teamID, id string, keepMemory bool) error {
	ctx, cancel := engineWork(ctx, changeLimit)
	defer cancel()
	defer m.locks.lock(id)()
	sb, err := m.live(teamID, id)
	if err != nil {
		return err
	}
	if sb.State == sandbox.StatePaused {
		return sandbox.Errorf(sandbox.KindConflict, "sandbox '%s' is already paused", id)
	}
	return m.pause(ctx, sb, keepMemory, "paused")
}

// pause pauses running sb. The caller holds its lock.
func (m *Manager) pause(ctx context.Context, sb sandbox.Sandbox, keepMemory bool, reason string) error {
	defer m.beginPause(sb.ID)()
	if _, ok := m.checkpointer(sb); ok && keepMemory && (m.cfg.PauseToDisk || m.caps.freezer == nil) {
		_, err := m.toDisk(ctx, sb, sandbox.PauseFrozen, reason)
		return err
	}
	mode := sandbox.PauseStopped
	if keepMemory && m.caps.freezer != nil {
		mode = sandbox.PauseFrozen
		if err := m.caps.freezer.Freeze(ctx, sb.ContainerID); err != nil {
			return sandbox.Wrap(sandbox.KindInternal, err, "failed to pause sandbox")
		}
	} else if err := m.cfg.Runtime.Stop(ctx, sb.ContainerID); err != nil {
		if sandbox.KindOf(err) == sandbox.KindUnavailable {
			return err // the engine cannot (Kubernetes without node agents): its message says so
		}
		return sandbox.Wrap(sandbox.KindInternal, err, "failed to pause sandbox")
	}
	now := time.Now().UTC()
	sb.State, sb.PauseMode, sb.PausedAt = sandbox.StatePaused, mode, now
	sb.Remaining = max(sb.EndAt.Sub(now), 0)
	if mode == sandbox.PauseStopped {
		sb.AgentAddr = ""
		m.removeEgress(ctx, sb.ID) // the engine may give its address to another
	}
	if err := m.save(ctx, sb, m.tell(ctx, sb, sandbox.EventPaused, map[string]any{"pause_mode": string(mode)})...); err != nil {
		if mode == sandbox.PauseFrozen {
			// Not recorded paused, it must not stay frozen: its traffic, a
			// pause tried again and a connect all take it for running.
			if terr := m.caps.freezer.Thaw(context.WithoutCancel(ctx), sb.ContainerID); terr != nil {
				m.log.Error("cannot thaw a sandbox whose pause was not saved", logkey.Sandbox, sb.ID, "err", terr)
			}
		}
		return err
	}
	m.notifyStop(sb.ID)
	m.announce(ctx, sb.ID, "sandbox paused", "mode", string(mode), "reason", reason)
	return nil
}

// beginPause readies running sandbox id for a pause: its proxied
// connections are cut (OnStop), and the proxy's requests for it wait for
// its lock (Route) until the returned function is called, once it is
// recorded paused or the pause failed. So nothing reaches a sandbox being
// frozen, stopped or checkpointed, its agent has no stream to drain before
// it stops, and whatever the cut streams' clients do next is judged as
// traffic to a paused sandbox. The caller holds its lock.
func (m *Manager) beginPause(id string) (done func()) {
	m.setPausing(id, true)
	m.notifyStop(id)
	return func() { m.setPausing(id, false) }
}

// ResumeOptions are the choices of E2B's deprecated resume; the zero
// value resumes as the sandbox was paused, with its own timeout action.
type ResumeOptions struct {
	// Reboot discards the memory of a paused sandbox and boots it afresh
	// on its filesystem (E2B's memory: false), as Connect does.
	Reboot bool
	// AutoPause, when set, replaces the sandbox's action on timeout: pause
	// when true, kill when false. Nil keeps it.
	AutoPause *bool
}

// Resume resumes a paused sandbox (E2B's deprecated /resume): running
// ones are KindConflict. It runs for at least timeout afterwards.
func (m *Manager) Resume(ctx context.Context, teamID, id string, timeout time.Duration, opts ResumeOptions) (sandbox.Sandbox, error) {
	if err := m.checkTimeout(timeout); err != nil {
		return sandbox.Sandbox{}, err
	}
	ctx, cancel := engineWork(ctx, m.createLimit())
	defer cancel()
	defer m.locks.lock(id)()
	sb, err := m.live(teamID, id)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if sb.State == sandbox.StateRunning {
		return sandbox.Sandbox{}, sandbox.Errorf(sandbox.KindConflict, "sandbox '%s' is already running", id)
	}
	if opts.Reboot {
		if sb, err = m.forgetMemory(ctx, sb); err != nil {
			return sandbox.Sandbox{}, m.resumeFailed(ctx, sb, err)
		}
	}
	if opts.AutoPause != nil {
		// Saved with the resumed state, so a failed resume keeps the old.
		sb.Lifecycle.OnTimeout = sandbox.TimeoutKill
		if *opts.AutoPause {
			sb.Lifecycle.OnTimeout = sandbox.TimeoutPause
		}
	}
	return m.resume(ctx, sb, timeout)
}

// Connect makes sure a sandbox runs for at least timeout from now and
// reports whether it had to resume it. It never shortens a running
// sandbox's life. A paused sandbox resumes with its memory and processes
// when it kept them, unless keepMemory is false: then it reboots, with its
// filesystem only (E2B's onResume "reboot").
func (m *Manager) Connect(ctx context.Context, teamID, id string, timeout time.Duration, keepMemory bool) (sb sandbox.Sandbox, resumed bool, err error) {
	if err := m.checkTimeout(timeout); err != nil {
		return sandbox.Sandbox{}, false, err
	}
	ctx, cancel := engineWork(ctx, m.createLimit())
	defer cancel()
	defer m.locks.lock(id)()
	sb, err = m.live(teamID, id)
	if err != nil {
		return sandbox.Sandbox{}, false, err
	}
	if sb.State == sandbox.StatePaused {
		if !keepMemory {
			if sb, err = m.forgetMemory(ctx, sb); err != nil {
				return sandbox.Sandbox{}, false, m.resumeFailed(ctx, sb, err)
			}
		}
		sb, err = m.resume(ctx, sb, timeout)
		return sb, err == nil, err
	}
	if end := time.Now().UTC().Add(timeout); end.After(sb.EndAt) {
		sb.EndAt = end
		if err := m.save(ctx, sb); err != nil {
			return sandbox.Sandbox{}, false, err
		}
	}
	return sb, false, nil
}

// forgetMemory turns a frozen or checkpointed sb into a stopped one, so
// that resuming it boots afresh on its filesystem. The caller holds its
// lock.
func (m *Manager) forgetMemory(ctx context.Context, sb sandbox.Sandbox) (sandbox.Sandbox, error) {
	switch sb.PauseMode {
	case sandbox.PauseFrozen:
		if err := m.cfg.Runtime.Stop(ctx, sb.ContainerID); err != nil {
			return sb, err
		}
	case sandbox.PauseCheckpointed:
		if cp := m.caps.checkpointer; cp != nil {
			if err := cp.DeleteCheckpoint(ctx, sb.ContainerID); err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
				return sb, err
			}
		}
	default:
		return sb, nil
	}
	sb.PauseMode = sandbox.PauseStopped
	if err := m.save(ctx, sb); err != nil {
		return sb, err
	}
	m.event(ctx, sb.ID, "info", "memory discarded: the sandbox reboots on its filesystem")
	return sb, nil
}

// resume brings paused sb back and gives it at least timeout, or what it
// had left when paused if that is longer. A sandbox paused to disk takes
// a place in its team's quota first, or stays paused. The caller holds
// its lock.
func (m *Manager) resume(ctx context.Context, sb sandbox.Sandbox, timeout time.Duration) (sandbox.Sandbox, error) {
	mode := sb.PauseMode
	if mode != sandbox.PauseFrozen {
		release, err := m.admitResume(ctx, sb)
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		defer release()
	}
	if mode == sandbox.PauseFrozen {
		if err := m.caps.thaw(ctx, sb.ContainerID); err != nil {
			return sandbox.Sandbox{}, m.resumeFailed(ctx, sb, err)
		}
	} else {
		var c sandbox.Container
		var err error
		fresh := true
		if mode == sandbox.PauseCheckpointed {
			c, fresh, err = m.restore(ctx, sb)
		} else {
			c, err = m.cfg.Runtime.Start(ctx, sb.ContainerID)
		}
		if err != nil {
			return sandbox.Sandbox{}, m.resumeFailed(ctx, sb, err)
		}
		sb.AgentAddr = c.AgentAddr
		err = m.applyEgress(ctx, sb, c.IP) // the address may be new
		if err == nil && fresh {
			err = m.initAgent(ctx, sb, m.cfg.InitTimeout, agentStart{})
		}
		if err != nil {
			m.removeEgress(ctx, sb.ID)
			if err := m.cfg.Runtime.Stop(context.WithoutCancel(ctx), sb.ContainerID); err != nil {
				m.log.Error("cannot stop sandbox after failed resume", logkey.Sandbox, sb.ID, "err", err)
			}
			return sandbox.Sandbox{}, sandbox.Wrap(sandbox.KindInternal, err, "failed to resume sandbox")
		}
	}
	now := time.Now().UTC()
	sb.State, sb.PauseMode, sb.PausedAt = sandbox.StateRunning, "", time.Time{}
	sb.ExecutionID = uuid.NewString()
	sb.EndAt = now.Add(max(timeout, sb.Remaining))
	sb.Remaining = 0
	if err := m.save(ctx, sb, m.tell(ctx, sb, sandbox.EventResumed, nil)...); err != nil {
		return sandbox.Sandbox{}, err
	}
	m.announce(ctx, sb.ID, "sandbox resumed", "mode", string(mode))
	return sb, nil
}

// resumeFailed handles a runtime error on resume: a vanished container
// means the sandbox is gone for good.
func (m *Manager) resumeFailed(ctx context.Context, sb sandbox.Sandbox, err error) error {
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		m.markVanished(ctx, sb)
		return sandbox.Errorf(sandbox.KindNotFound, "sandbox '%s' not found", sb.ID)
	}
	return sandbox.Wrap(sandbox.KindInternal, err, "failed to resume sandbox")
}

// Route returns a running sandbox for the proxy, resuming a paused one
// whose Lifecycle.AutoResume is set. Unknown or killed sandboxes are
// KindNotFound; paused ones without auto-resume are KindUnavailable.
// admit, when not nil, vets the request first (the proxy checks tokens;
// Route does not check teams): its error is returned as is, and nothing
// is resumed. A request for a sandbox being paused waits for the pause to
// end, then is routed as one for a paused sandbox.
func (m *Manager) Route(ctx context.Context, id string, admit func(sandbox.Sandbox) error) (sandbox.Sandbox, error) {
	if admit == nil {
		admit = func(sandbox.Sandbox) error { return nil }
	}
	if m.following.Load() {
		return m.routeFollowing(ctx, id, admit)
	}
	if sb, ok := m.routable(id); ok {
		return sb, admit(sb)
	}
	defer m.locks.lock(id)()
	sb, ok := m.cached(id)
	switch {
	case !ok || (sb.State != sandbox.StateRunning && sb.State != sandbox.StatePaused):
		return sandbox.Sandbox{}, sandbox.Errorf(sandbox.KindNotFound, "sandbox '%s' not found", id)
	case sb.State == sandbox.StateRunning:
		return sb, admit(sb)
	case !sb.Lifecycle.AutoResume:
		return sandbox.Sandbox{}, sandbox.Errorf(sandbox.KindUnavailable, "sandbox '%s' is paused", id)
	}
	if err := admit(sb); err != nil {
		return sandbox.Sandbox{}, err
	}
	return m.resume(ctx, sb, sb.Timeout)
}
