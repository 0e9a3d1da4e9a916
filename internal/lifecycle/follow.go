package lifecycle

import (
	"context"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// A Manager follows, rather than leads, when several replicas of the
// control plane share one store (docs/kubernetes.md): one of them, the
// leader, runs what must run once (the timers, the warm pool, reconcile
// and adoption of the engine's sandboxes) and makes every change; the
// others answer reads and route the proxy's traffic to running sandboxes.
// A follower keeps no state of its own: every read goes to the store, so
// it sees the leader's writes at once, and a sandbox paused with
// auto-resume is resumed by the leader (Deps.Resume) before its traffic
// goes through.

// storeRead bounds a follower's read of the store.
const storeRead = 5 * time.Second

// Follow makes a Manager that has not started a follower's: it reads
// every sandbox from the store and changes none; Lead makes it the
// leader's. Call it instead of Start.
func (m *Manager) Follow() { m.following.Store(true) }

// Lead makes a follower the leader's Manager: it loads the store afresh,
// adopts the engine's sandboxes and re-arms every timer (as Start). Close
// it as any other.
//
// The store is loaded while the Manager still follows: routes and reads
// go on reading the store until the leader's cache holds every sandbox,
// never an empty or partial cache (the failover e2e's proxied command
// answered 502, "sandbox not found", as a follower became leader).
func (m *Manager) Lead(ctx context.Context) error {
	if err := m.readAll(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	clear(m.pausing)
	m.mu.Unlock()
	m.following.Store(false)
	return m.start(ctx)
}

// Following reports whether the Manager is a follower's.
func (m *Manager) Following() bool { return m.following.Load() }

// readThrough returns sandbox id from the store, and keeps it in the
// cache; a sandbox the store does not have leaves it too, and while the
// store cannot be read, the cache answers.
func (m *Manager) readThrough(id string) (sandbox.Sandbox, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), storeRead)
	defer cancel()
	sb, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
		// The store is away (a restart): what was last read of it stands,
		// so that running sandboxes' traffic goes on.
		m.log.Warn("cannot read a sandbox from the store; using what was last read", logkey.Sandbox, id, "err", err)
		m.mu.RLock()
		defer m.mu.RUnlock()
		sb, ok := m.sandboxes[id]
		return sb, ok
	}
	if err != nil {
		m.mu.Lock()
		delete(m.sandboxes, id)
		m.mu.Unlock()
		return sandbox.Sandbox{}, false
	}
	m.mu.Lock()
	m.sandboxes[id] = sb
	m.mu.Unlock()
	return sb, true
}

// readAll replaces the cache with the store's sandboxes: a follower's on
// each list, a leader's as it starts.
func (m *Manager) readAll(ctx context.Context) error {
	all, err := m.cfg.Store.ListSandboxes(ctx, sandbox.SandboxFilter{})
	if err != nil {
		return sandbox.Wrap(sandbox.KindUnavailable, err, "cannot list sandboxes")
	}
	fresh := make(map[string]sandbox.Sandbox, len(all))
	for _, sb := range all {
		fresh[sb.ID] = sb
	}
	m.mu.Lock()
	m.sandboxes = fresh
	m.mu.Unlock()
	return nil
}

// routeFollowing is Route on a follower: a running sandbox is routed to
// as the store has it; a paused one with auto-resume is resumed by the
// leader first.
func (m *Manager) routeFollowing(ctx context.Context, id string, admit func(sandbox.Sandbox) error) (sandbox.Sandbox, error) {
	sb, ok := m.readThrough(id)
	switch {
	case !ok || (sb.State != sandbox.StateRunning && sb.State != sandbox.StatePaused):
		return sandbox.Sandbox{}, sandbox.Errorf(sandbox.KindNotFound, "sandbox '%s' not found", id)
	case sb.State == sandbox.StateRunning:
		return sb, admit(sb)
	case !sb.Lifecycle.AutoResume || m.cfg.Resume == nil:
		return sandbox.Sandbox{}, sandbox.Errorf(sandbox.KindUnavailable, "sandbox '%s' is paused", id)
	}
	if err := admit(sb); err != nil {
		return sandbox.Sandbox{}, err
	}
	if err := m.cfg.Resume(ctx, id); err != nil {
		return sandbox.Sandbox{}, err
	}
	if sb, ok = m.readThrough(id); !ok || sb.State != sandbox.StateRunning {
		return sandbox.Sandbox{}, sandbox.Errorf(sandbox.KindUnavailable, "sandbox '%s' was not resumed", id)
	}
	return sb, nil
}
