// Package lifecycle is the single writer of sandbox state. Its Manager
// creates, connects, pauses, resumes, kills, snapshots and forks sandboxes,
// runs their timers (TTL, frozen → stopped or checkpointed demotion, removal
// of long-stopped and killed sandboxes, old checkpoints), claims started
// containers from the warm pool (internal/warmpool, which it runs) for fast
// creates, samples their metrics and keeps their event log, and reconciles
// the store with the container runtime: on start, periodically, and for
// each container the engine reports changed (events.go).
//
// It owns no HTTP: the REST API and the data-plane proxy call its methods.
// It keeps every sandbox in memory as a write-through cache of the store,
// which stays the source of truth across restarts. Time comes from the time
// package, so tests drive the timers with testing/synctest.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/phases"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/warmpool"
)

// EventRecorder prepares the lifecycle events of sandboxes
// (internal/events), which the Manager saves with the change they tell
// of, in one write. Its methods must not call the Manager: they are
// called with the sandbox's lock held.
type EventRecorder interface {
	// Prepare returns ev as it is stored, with its deliveries, without
	// storing it.
	Prepare(ctx context.Context, ev sandbox.Event) sandbox.Recorded
	// Stored is told of events once they are stored.
	Stored(evs ...sandbox.Recorded)
}

// Deps are what a Manager works through: the engine, the agents, the
// store and the optional parts around them. They are not settings: a
// Manager's values are its Settings.
type Deps struct {
	Runtime sandbox.Runtime // required
	Agent   sandbox.Agent   // required
	Store   sandbox.Store   // required
	Logger  *slog.Logger    // nil = discard
	// OnStop is called, outside any lock, when a sandbox stops running
	// (paused, killed, timed out), so the proxy can cut its open streams.
	// A pause calls it twice: before the engine freezes, stops or
	// checkpoints the sandbox, so that no stream into it is left open then,
	// and once it is recorded paused, for any that slipped in meanwhile.
	// nil = nothing to notify.
	OnStop func(sandboxID string)
	// Firewall enforces sandboxes' egress rules (internal/firewall);
	// nil = rules are stored and reported but not enforced (tests).
	Firewall sandbox.Firewall
	// Templates resolves built templates (internal/template); nil = only
	// "base", snapshots and local images.
	Templates TemplateResolver
	// Commands runs templates' start and ready commands in new sandboxes;
	// nil = creating a sandbox of a template that has one fails.
	Commands CommandRunner
	// Events prepares the event of every lifecycle change (created,
	// updated, paused, resumed, killed), saved with it; nil = none.
	Events EventRecorder
	// Resume has the leader resume a paused sandbox for the proxy's
	// traffic, on a follower (Follow); nil = a follower answers that the
	// sandbox is paused.
	Resume func(ctx context.Context, sandboxID string) error
	// CABundle is PEM certificates every sandbox trusts (Warren's CA, for
	// the egress gateway's interception): the agent installs them into
	// the container's trust store at every init. "" = none.
	CABundle string
}

// check refuses Deps without the parts a Manager cannot work without.
func (d Deps) check() error {
	if d.Runtime == nil || d.Agent == nil || d.Store == nil {
		return errors.New("lifecycle: Deps.Runtime, Agent and Store are required")
	}
	return nil
}

// config is what a Manager was made with. Its fields are read as
// m.cfg.Runtime or m.cfg.MaxFrozen: Deps and Settings never share a name.
type config struct {
	Deps
	Settings
}

// Manager owns sandbox state. Create it with New, call Start, and Close
// when done.
type Manager struct {
	cfg   config
	log   *slog.Logger
	locks keyedMutex

	mu        sync.RWMutex // guards sandboxes and pausing
	sandboxes map[string]sandbox.Sandbox
	// pausing holds the IDs of running sandboxes being paused: Route
	// sends their requests to wait for the pause (see beginPause).
	pausing map[string]struct{}

	// pool keeps started containers for creates to claim.
	pool *warmpool.Pool
	// imageIDs and imageLabelSets share one engine inspect among the
	// creates of a burst.
	imageIDs       flights[string]
	imageLabelSets flights[map[string]string]
	caps           capabilities // the optional parts of cfg.Runtime
	// createPhases sums the steps of the creates that succeeded, by
	// whether they claimed a pooled container (observeCreate).
	createPhases phases.Histograms

	// memoryFlights are the memory images forks and snapshots in flight
	// are making or using (memory.go).
	memoryFlights memoryFlights

	// quotas counts the teams' admissions in flight (quota.go).
	quotas quotas

	reconciling sync.Mutex // held by Reconcile: the loops' and events' never overlap
	// following is set while the Manager is a follower's (follow.go).
	following atomic.Bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Manager; it does nothing until Start. It refuses
// settings that Settings.Validate refuses.
func New(deps Deps, settings Settings) (*Manager, error) {
	if err := deps.check(); err != nil {
		return nil, err
	}
	if err := settings.Validate(); err != nil {
		return nil, err
	}
	log := logkey.For(deps.Logger, "lifecycle")
	if lowered := settings.clampResources(); len(lowered) > 0 {
		log.Warn("sandbox resources lowered to the server's maxima", "lowered", lowered,
			"cpu_count", settings.CPUCount, "memory_mb", settings.MemoryMB)
	}
	m := &Manager{
		cfg:       config{deps, settings},
		log:       log,
		sandboxes: map[string]sandbox.Sandbox{},
		pausing:   map[string]struct{}{},
		caps:      capabilitiesOf(deps.Runtime),
	}
	m.pool = m.newPool()
	return m, nil
}

// Settings returns the settings the manager runs with: those given to
// New, CPUCount and MemoryMB held to the maxima.
func (m *Manager) Settings() Settings { return m.cfg.Settings }

// Start loads the store, reconciles it with the runtime and launches the
// timer, reconcile, metrics and engine event loops, which run until Close.
func (m *Manager) Start(ctx context.Context) error {
	if err := m.readAll(ctx); err != nil {
		return fmt.Errorf("load sandboxes: %w", err)
	}
	return m.start(ctx)
}

// start is Start once the store is loaded.
func (m *Manager) start(ctx context.Context) error {
	loops, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// Subscribed before the first reconcile, so that nothing that happens
	// after it goes unseen.
	events := m.subscribe(loops)
	if err := m.Reconcile(ctx); err != nil {
		cancel()
		return fmt.Errorf("reconcile: %w", err)
	}
	if err := m.syncFirewall(ctx); err != nil {
		cancel()
		return fmt.Errorf("install the firewall rules: %w", err)
	}
	m.pool.Start(loops)
	ctx, m.cancel = loops, cancel
	m.wg.Go(func() { m.watchEvents(ctx, events) })
	m.wg.Go(func() { m.every(ctx, m.cfg.TickInterval, m.sweep) })
	m.wg.Go(func() { m.every(ctx, m.cfg.MetricsInterval, m.sampleMetrics) })
	m.wg.Go(func() {
		m.every(ctx, m.cfg.ReconcileInterval, func(ctx context.Context) {
			if err := m.Reconcile(ctx); err != nil {
				m.log.Warn("reconcile failed", "err", err)
			}
		})
	})
	return nil
}

// Close stops the manager's loops. A manager that keeps no live sandbox
// leaves nothing behind on the engine: it removes its warm pool's
// containers and its firewall rules. With live sandboxes both stay, so the
// sandboxes stay isolated and the next start adopts the pool.
func (m *Manager) Close() error {
	if m.following.Load() {
		return nil // the leader's pool and rules are not a follower's to remove
	}
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
	m.pool.Close()
	if m.anyLive() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The rules go first: a server stopped for good (SIGKILL) partway
	// through must not leave rules naming addresses the engine hands to
	// other servers' sandboxes; pooled containers it leaves run only the
	// agent, and the next start adopts or removes them.
	if m.cfg.Firewall != nil {
		if err := m.cfg.Firewall.Uninstall(ctx); err != nil {
			m.log.Warn("cannot remove firewall rules", "err", err)
		}
	}
	m.pool.Empty(ctx)
	m.removePoolLeft(ctx)
	return nil
}

// removePoolLeft removes the pool's containers the engine still lists:
// those the pool never knew, made after this manager's last reconcile by
// the server it replaced (on Kubernetes the old pod still stops, its pool
// refilling, while the new one starts).
func (m *Manager) removePoolLeft(ctx context.Context) {
	list, err := m.cfg.Runtime.List(ctx)
	if err != nil {
		m.log.Warn("cannot list the warm pool's containers left", "err", err)
		return
	}
	for _, c := range list {
		if c.Labels[sandbox.LabelPool] == "true" {
			m.pool.Discard(ctx, c.ID, c.SandboxID, "server stopped with no sandbox")
		}
	}
}

// anyLive reports whether a sandbox is being created, running or paused.
func (m *Manager) anyLive() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, sb := range m.sandboxes {
		if sb.State != sandbox.StateKilled {
			return true
		}
	}
	return false
}

func (m *Manager) every(ctx context.Context, d time.Duration, f func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}

// cached returns a sandbox from the cache, or from the store on a
// follower.
func (m *Manager) cached(id string) (sandbox.Sandbox, bool) {
	if m.following.Load() {
		return m.readThrough(id)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	sb, ok := m.sandboxes[id]
	return sb, ok
}

// routable returns the cached sandbox id when the proxy may reach it
// without taking its lock: it is running and not being paused.
func (m *Manager) routable(id string) (sandbox.Sandbox, bool) {
	if m.following.Load() {
		return sandbox.Sandbox{}, false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	sb, ok := m.sandboxes[id]
	_, pausing := m.pausing[id]
	return sb, ok && !pausing && sb.State == sandbox.StateRunning
}

// setPausing marks id as being paused, or no longer.
func (m *Manager) setPausing(id string, on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if on {
		m.pausing[id] = struct{}{}
	} else {
		delete(m.pausing, id)
	}
}

// snapshotAll returns every cached sandbox, in no order.
func (m *Manager) snapshotAll() []sandbox.Sandbox {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]sandbox.Sandbox, 0, len(m.sandboxes))
	for _, sb := range m.sandboxes {
		out = append(out, sb)
	}
	return out
}

// save writes sb through to the store with evs, the events of its change
// (tell), in one write, then the cache. Callers hold the sandbox's lock.
// A store out of reach (a PostgreSQL restart) fails the call as
// unavailable, with the store's Retry-After, and keeps neither the change
// nor its events.
func (m *Manager) save(ctx context.Context, sb sandbox.Sandbox, evs ...sandbox.Recorded) error {
	if err := m.cfg.Store.PutSandbox(context.WithoutCancel(ctx), sb, evs...); err != nil {
		if sandbox.KindOf(err) == sandbox.KindUnavailable {
			return err
		}
		return sandbox.Wrap(sandbox.KindInternal, err, "cannot save sandbox state")
	}
	// The sandbox of a create, cached, now holds the place its admission
	// took: both change in one step under both locks (quota.go), so that
	// it is counted once.
	if a := admissionOf(ctx); a != nil {
		m.quotas.mu.Lock()
		defer m.quotas.mu.Unlock()
		a.id = sb.ID
	}
	m.mu.Lock()
	m.sandboxes[sb.ID] = sb
	m.mu.Unlock()
	if len(evs) > 0 {
		m.cfg.Events.Stored(evs...)
	}
	return nil
}

// forget deletes sb from the store and the cache.
func (m *Manager) forget(ctx context.Context, id string) error {
	if err := m.cfg.Store.DeleteSandbox(context.WithoutCancel(ctx), id); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.sandboxes, id)
	m.mu.Unlock()
	return nil
}

// event appends a lifecycle event to the sandbox's log.
func (m *Manager) event(ctx context.Context, id, level, msg string, kv ...string) {
	fields := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		fields[kv[i]] = kv[i+1]
	}
	e := sandbox.LogEntry{SandboxID: id, Time: time.Now().UTC(), Level: level, Message: msg, Fields: fields}
	if err := m.cfg.Store.AppendLog(context.WithoutCancel(ctx), e); err != nil {
		m.log.Warn("cannot append sandbox log", logkey.Sandbox, id, "err", err)
	}
}

// announce appends an info event to the sandbox's log and writes it to
// the server's log too, with the same fields: what an operator follows
// of a sandbox's life (paused, resumed, killed).
func (m *Manager) announce(ctx context.Context, id, msg string, kv ...string) {
	m.event(ctx, id, "info", msg, kv...)
	args := make([]any, 0, 2+len(kv))
	args = append(args, logkey.Sandbox, id)
	for _, v := range kv {
		args = append(args, v)
	}
	m.log.InfoContext(ctx, msg, args...)
}

// tell returns the event of type t that tells of sb's change, prepared
// by Deps.Events to be saved with sb (save); none without Deps.Events.
// data adds to the sandbox's metadata in the event.
func (m *Manager) tell(ctx context.Context, sb sandbox.Sandbox, t sandbox.EventType, data map[string]any) []sandbox.Recorded {
	if m.cfg.Events == nil {
		return nil
	}
	if len(sb.Metadata) > 0 {
		if data == nil {
			data = map[string]any{}
		}
		data["sandbox_metadata"] = maps.Clone(sb.Metadata)
	}
	return []sandbox.Recorded{m.cfg.Events.Prepare(ctx, sandbox.Event{Type: t, Time: time.Now().UTC(), SandboxID: sb.ID,
		TeamID: sb.TeamID, TemplateID: sb.TemplateID, BuildID: sb.BuildID, ExecutionID: sb.ExecutionID, Data: data})}
}

func (m *Manager) notifyStop(id string) {
	if m.cfg.OnStop != nil {
		m.cfg.OnStop(id)
	}
}

// keyedMutex serialises operations on one sandbox.
type keyedMutex struct {
	mu sync.Mutex // guards m
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

// lock locks id and returns the unlock function.
func (k *keyedMutex) lock(id string) func() {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e := k.m[id]
	if e == nil {
		e = &keyedEntry{}
		k.m[id] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(k.m, id)
		}
		k.mu.Unlock()
	}
}
