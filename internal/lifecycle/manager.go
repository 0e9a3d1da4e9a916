// Package lifecycle is the single writer of sandbox state. Its Manager
// creates, connects, pauses, resumes, kills, snapshots and forks sandboxes,
// runs their timers (TTL, frozen → stopped or checkpointed demotion, removal
// of long-stopped and killed sandboxes, old checkpoints), keeps a warm pool of started containers for fast
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
	"runtime"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// EventRecorder takes the lifecycle events of sandboxes
// (internal/events). Record must not call the Manager: it is called with
// the sandbox's lock held.
type EventRecorder interface {
	Record(ctx context.Context, ev sandbox.Event)
}

// Config configures a Manager. Zero durations and counts take the
// documented default; a negative value disables the limit where noted.
type Config struct {
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
	// required with Templates.
	Commands CommandRunner
	// Events is told of every lifecycle change (created, updated, paused,
	// resumed, killed) once it is saved; nil = none.
	Events EventRecorder

	BaseImage   string // image of the "base" template; default "warren/base"
	EnvdVersion string // reported to clients; default "0.6.13"
	DefaultUser string // the agent's default user; default "user"
	// CodeInterpreterImage is the image of the "code-interpreter-v1"
	// template (warren image build code-interpreter); default
	// "warren/code-interpreter".
	CodeInterpreterImage string
	// MCPGatewayImage is the image of the "mcp-gateway" template (warren
	// image build mcp-gateway); default "warren/mcp-gateway".
	MCPGatewayImage string

	CPUCount int // CPUs per sandbox unless its template asks; default 2
	MemoryMB int // memory per sandbox unless its template asks, in MiB; default 512
	// MaxCPUCount and MaxMemoryMB are the most CPUs and memory (MiB) one
	// sandbox gets, whatever its template asks: CheckResources refuses a
	// client more, a template that asked for more before is held to them
	// at each create, and so are CPUCount and MemoryMB. Defaults: the
	// machine's CPUs (runtime.NumCPU) and half its memory
	// (DefaultMaxMemoryMB).
	MaxCPUCount int
	MaxMemoryMB int
	// DiskSizeMB is each sandbox's disk size: reported to clients, and the
	// limit of its writable layer where the engine's storage has quotas
	// (overlay2 on xfs mounted with pquota). Default 10240.
	DiskSizeMB int
	PidsLimit  int // max processes per sandbox; default 4096, negative = none

	// WarmPool is how many started, not yet initialised containers of the
	// base template are kept for creates to claim (see pool.go). 0 = no
	// pool; Defaults has DefaultWarmPool, for warren serve.
	WarmPool int
	// WarmPoolCodeInterpreter is the same for the code-interpreter-v1
	// template: containers whose python and javascript kernels are up.
	// None are kept while CodeInterpreterImage is not built. 0 = no pool;
	// Defaults has DefaultWarmPoolCodeInterpreter.
	WarmPoolCodeInterpreter int

	MaxTimeout  time.Duration // longest TTL a client may ask for; default 24h
	InitTimeout time.Duration // how long to wait for the agent; default 30s
	// ReadyTimeout bounds how long a template's ready command may keep
	// failing before create gives up; default 60s.
	ReadyTimeout time.Duration

	// FreezeMaxAge demotes frozen sandboxes to stopped after this long;
	// default 10m, negative = never.
	FreezeMaxAge time.Duration
	// MaxFrozen caps frozen sandboxes; the oldest beyond it are demoted to
	// stopped. Default 16, negative = no cap.
	MaxFrozen int
	// StoppedMaxAge removes sandboxes paused (stopped or checkpointed)
	// for longer than this; default 168h (7 days), negative = never.
	StoppedMaxAge time.Duration
	// SandboxRuntime is what new sandboxes' containers run under;
	// default sandbox.RuntimeRunc. Under sandbox.RuntimeGVisor, with a
	// Runtime that is a sandbox.Checkpointer, demotion checkpoints frozen
	// sandboxes (PauseCheckpointed) instead of stopping them.
	SandboxRuntime sandbox.OCIRuntime
	// PauseToDisk makes a pause that keeps memory checkpoint a gVisor
	// sandbox straight away instead of freezing it: no RAM is held, and
	// resume takes a restore (a fraction of a second) instead of a thaw.
	// Default false.
	PauseToDisk bool
	// CheckpointMaxAge deletes the checkpoints of sandboxes paused this
	// long, freeing their disk; they become stopped (filesystem kept,
	// memory lost). Default 24h, negative = never.
	CheckpointMaxAge time.Duration
	// KilledRetention keeps killed sandboxes' records (and their logs)
	// this long before deleting them; default 1h.
	KilledRetention time.Duration

	TickInterval      time.Duration // how often timers are checked; default 1s
	ReconcileInterval time.Duration // how often the engine is re-checked; default 30s
	MetricsInterval   time.Duration // metrics sampling period; default 5s
	MetricsHistory    int           // samples per sandbox kept at full resolution, older ones thinned; default 720
}

// Defaults returns a Config holding every default, for flags to show.
func Defaults() Config {
	var c Config
	c.setDefaults()
	c.Logger = nil
	c.WarmPool = DefaultWarmPool
	c.WarmPoolCodeInterpreter = DefaultWarmPoolCodeInterpreter
	return c
}

func (c *Config) setDefaults() {
	def := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	defInt := func(p *int, d int) {
		if *p == 0 {
			*p = d
		}
	}
	defStr := func(p *string, d string) {
		if *p == "" {
			*p = d
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	defStr(&c.BaseImage, "warren/base")
	defStr(&c.CodeInterpreterImage, "warren/code-interpreter")
	defStr(&c.MCPGatewayImage, "warren/mcp-gateway")
	defStr(&c.EnvdVersion, "0.6.13")
	defStr(&c.DefaultUser, "user")
	defInt(&c.CPUCount, 2)
	defInt(&c.MemoryMB, 512)
	defInt(&c.MaxCPUCount, runtime.NumCPU())
	if c.MaxMemoryMB == 0 {
		c.MaxMemoryMB = DefaultMaxMemoryMB(c.MemoryMB)
	}
	defInt(&c.DiskSizeMB, 10240)
	defInt(&c.PidsLimit, 4096)
	def(&c.MaxTimeout, 24*time.Hour)
	def(&c.InitTimeout, 30*time.Second)
	def(&c.ReadyTimeout, time.Minute)
	def(&c.FreezeMaxAge, 10*time.Minute)
	defInt(&c.MaxFrozen, 16)
	def(&c.StoppedMaxAge, 7*24*time.Hour)
	def(&c.CheckpointMaxAge, 24*time.Hour)
	defStr((*string)(&c.SandboxRuntime), string(sandbox.RuntimeRunc))
	def(&c.KilledRetention, time.Hour)
	def(&c.TickInterval, time.Second)
	def(&c.ReconcileInterval, 30*time.Second)
	def(&c.MetricsInterval, 5*time.Second)
	defInt(&c.MetricsHistory, 720)
}

// Manager owns sandbox state. Create it with New, call Start, and Close
// when done.
type Manager struct {
	cfg   Config
	log   *slog.Logger
	locks keyedMutex

	mu        sync.RWMutex // guards sandboxes and pausing
	sandboxes map[string]sandbox.Sandbox
	// pausing holds the IDs of running sandboxes being paused: Route
	// sends their requests to wait for the pause (see beginPause).
	pausing map[string]struct{}

	pool *warmPool
	caps capabilities // the optional parts of cfg.Runtime

	reconciling sync.Mutex // held by Reconcile: the loops' and events' never overlap

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Manager; it does nothing until Start.
func New(cfg Config) (*Manager, error) {
	if cfg.Runtime == nil || cfg.Agent == nil || cfg.Store == nil {
		return nil, errors.New("lifecycle: Runtime, Agent and Store are required")
	}
	cfg.setDefaults()
	if lowered := cfg.clampResources(); len(lowered) > 0 {
		cfg.Logger.Warn("sandbox resources lowered to the server's maxima", "lowered", lowered,
			"cpu_count", cfg.CPUCount, "memory_mb", cfg.MemoryMB)
	}
	return &Manager{
		cfg:       cfg,
		log:       cfg.Logger,
		sandboxes: map[string]sandbox.Sandbox{},
		pausing:   map[string]struct{}{},
		pool:      newWarmPool(),
		caps:      capabilitiesOf(cfg.Runtime),
	}, nil
}

// Config returns the manager's configuration with defaults applied.
func (m *Manager) Config() Config { return m.cfg }

// Start loads the store, reconciles it with the runtime and launches the
// timer, reconcile, metrics and engine event loops, which run until Close.
func (m *Manager) Start(ctx context.Context) error {
	all, err := m.cfg.Store.ListSandboxes(ctx, sandbox.SandboxFilter{})
	if err != nil {
		return fmt.Errorf("load sandboxes: %w", err)
	}
	m.mu.Lock()
	for _, sb := range all {
		m.sandboxes[sb.ID] = sb
	}
	m.mu.Unlock()
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
	ctx, m.cancel = loops, cancel
	m.wg.Go(func() { m.watchEvents(ctx, events) })
	m.wg.Go(func() { m.every(ctx, m.cfg.TickInterval, m.sweep) })
	m.wg.Go(func() { m.every(ctx, m.cfg.MetricsInterval, m.sampleMetrics) })
	if m.poolEnabled() {
		m.wg.Go(func() { m.refillLoop(ctx) })
	}
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
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
	if m.anyLive() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, e := range m.pool.drop(func(pooled) bool { return false }) {
		m.discardPooled(ctx, e.container.ID, e.sandboxID, "server stopped with no sandbox")
	}
	if m.cfg.Firewall != nil {
		if err := m.cfg.Firewall.Uninstall(ctx); err != nil {
			m.log.Warn("cannot remove firewall rules", "err", err)
		}
	}
	return nil
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

// cached returns a sandbox from the cache.
func (m *Manager) cached(id string) (sandbox.Sandbox, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	sb, ok := m.sandboxes[id]
	return sb, ok
}

// routable returns the cached sandbox id when the proxy may reach it
// without taking its lock: it is running and not being paused.
func (m *Manager) routable(id string) (sandbox.Sandbox, bool) {
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

// save writes sb through to the store, then the cache. Callers hold the
// sandbox's lock.
func (m *Manager) save(ctx context.Context, sb sandbox.Sandbox) error {
	if err := m.cfg.Store.PutSandbox(context.WithoutCancel(ctx), sb); err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "cannot save sandbox state")
	}
	m.mu.Lock()
	m.sandboxes[sb.ID] = sb
	m.mu.Unlock()
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
		m.log.Warn("cannot append sandbox log", logSandbox, id, "err", err)
	}
}

// record tells Config.Events of a change to sb; data adds to the
// sandbox's metadata in the event.
func (m *Manager) record(ctx context.Context, sb sandbox.Sandbox, t sandbox.EventType, data map[string]any) {
	if m.cfg.Events == nil {
		return
	}
	if len(sb.Metadata) > 0 {
		if data == nil {
			data = map[string]any{}
		}
		data["sandbox_metadata"] = maps.Clone(sb.Metadata)
	}
	m.cfg.Events.Record(ctx, sandbox.Event{Type: t, Time: time.Now().UTC(), SandboxID: sb.ID, TeamID: sb.TeamID,
		TemplateID: sb.TemplateID, BuildID: sb.BuildID, ExecutionID: sb.ExecutionID, Data: data})
}

func (m *Manager) notifyStop(id string) {
	if m.cfg.OnStop != nil {
		m.cfg.OnStop(id)
	}
}

// Log attribute keys.
const (
	logSandbox   = "sandbox"
	logTemplate  = "template"
	logContainer = "container"
)

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
