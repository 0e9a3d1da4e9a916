package lifecycle

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// The warm pool keeps Config.WarmPool containers of the base template
// started, their agents up but not initialised, so that creating a
// sandbox skips the engine's container start (most of a cold create).
// A container's name and hostname are fixed when it is made, so each one
// is made for a sandbox ID chosen in advance; the sandbox that claims it
// takes that ID.
//
// Pooled containers are labelled sandbox.LabelPool and have no record in
// the store until claimed. A claim saves the record before it touches the
// container, so a container with a record is a sandbox's whatever its
// labels say, and one without is the pool's: reconcile adopts it when it
// still fits (running, current image, room in the pool) and removes it
// otherwise. Close leaves pooled containers running, so a restarted server
// starts with a full pool.

// DefaultWarmPool is warren serve's default Config.WarmPool.
const DefaultWarmPool = 2

const (
	// poolRecheck is how often a full pool checks that the base image
	// was not rebuilt; claims check it anyway.
	poolRecheck = 15 * time.Second
	// A failing refill waits this long, doubling up to the maximum;
	// claims do not cut the wait short.
	poolBackoffMin = time.Second
	poolBackoffMax = time.Minute
)

// pooled is a started container waiting for a sandbox.
type pooled struct {
	sandboxID string
	secret    string // its agent secret
	container sandbox.Container
	image     string // the reference it was made from
	imageID   string
	limits    limits // what it was made with; zero when adopted (unknown)
}

type limits struct{ cpu, memMB, pids int }

// warmPool is the pool's bookkeeping; the Manager's methods below do the
// work.
type warmPool struct {
	mu    sync.Mutex      // guards ready and busy
	ready []pooled        // oldest first
	busy  map[string]bool // sandbox IDs being made for, or claimed from, the pool
	kick  chan struct{}   // wakes the refill loop; buffered
}

func newWarmPool() *warmPool {
	return &warmPool{busy: map[string]bool{}, kick: make(chan struct{}, 1)}
}

// knows reports whether id is a pooled container's, or one being made or
// claimed.
func (p *warmPool) knows(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy[id] || slices.ContainsFunc(p.ready, func(e pooled) bool { return e.sandboxID == id })
}

func (p *warmPool) setBusy(id string, busy bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if busy {
		p.busy[id] = true
	} else {
		delete(p.busy, id)
	}
}

// put adds e unless the pool already holds max; it reports whether it did.
func (p *warmPool) put(e pooled, max int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready) >= max {
		return false
	}
	p.ready = append(p.ready, e)
	return true
}

// take removes the oldest container of image imageID and marks its
// sandbox ID busy; the claimer clears it with setBusy.
func (p *warmPool) take(image, imageID string) (pooled, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wake() // a miss too: the pool may need refilling with a new image
	i := slices.IndexFunc(p.ready, func(e pooled) bool { return e.image == image && e.imageID == imageID })
	if i < 0 {
		return pooled{}, false
	}
	e := p.ready[i]
	p.ready = slices.Delete(p.ready, i, i+1)
	p.busy[e.sandboxID] = true
	return e, true
}

// drop removes the entries keep rejects and returns them.
func (p *warmPool) drop(keep func(pooled) bool) []pooled {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gone []pooled
	p.ready = slices.DeleteFunc(p.ready, func(e pooled) bool {
		if keep(e) {
			return false
		}
		gone = append(gone, e)
		return true
	})
	return gone
}

func (p *warmPool) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}

func (p *warmPool) entries() []pooled {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.ready)
}

// wake asks the refill loop to run; the caller may hold p.mu.
func (p *warmPool) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// WarmPoolReady returns how many pooled containers wait to be claimed.
func (m *Manager) WarmPoolReady() int { return m.pool.len() }

// refillLoop keeps the pool full until ctx ends.
func (m *Manager) refillLoop(ctx context.Context) {
	var backoff time.Duration
	for {
		wait, kick := poolRecheck, m.pool.kick
		if err := m.refill(ctx); err != nil && ctx.Err() == nil {
			level := slog.LevelWarn // once per run of failures
			if backoff > 0 {
				level = slog.LevelDebug
			}
			backoff = min(max(2*backoff, poolBackoffMin), poolBackoffMax)
			wait, kick = backoff, nil // a nil channel never fires
			m.log.Log(ctx, level, "warm pool refill failed", "err", err, "retry_in", backoff)
		} else {
			backoff = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// refill discards pooled containers of an outdated base image and makes
// new ones until the pool is full.
func (m *Manager) refill(ctx context.Context) error {
	if m.cfg.WarmPool <= 0 {
		return nil
	}
	imageID, err := m.cfg.Runtime.ImageID(ctx, m.cfg.BaseImage)
	if err != nil {
		return err
	}
	for _, e := range m.pool.drop(func(e pooled) bool { return e.imageID == imageID }) {
		m.discardPooled(ctx, e.container.ID, e.sandboxID, "base image rebuilt")
	}
	for m.pool.len() < m.cfg.WarmPool && ctx.Err() == nil {
		if err := m.makePooled(ctx, imageID); err != nil {
			return err
		}
	}
	return nil
}

// makePooled creates and starts one pooled container of the base image.
func (m *Manager) makePooled(ctx context.Context, imageID string) error {
	sb := sandbox.Sandbox{
		ID:          sandbox.NewID(),
		Image:       m.cfg.BaseImage,
		AgentSecret: sandbox.NewToken(),
		CPUCount:    m.cfg.CPUCount,
		MemoryMB:    m.cfg.MemoryMB,
	}
	m.pool.setBusy(sb.ID, true)
	defer m.pool.setBusy(sb.ID, false)
	spec := m.containerSpec(sb)
	spec.Labels = map[string]string{
		sandbox.LabelManaged: "true",
		sandbox.LabelSandbox: sb.ID,
		sandbox.LabelPool:    "true",
		sandbox.LabelRuntime: string(spec.Runtime),
	}
	c, err := m.cfg.Runtime.Create(ctx, spec)
	if err != nil {
		return err
	}
	if c.ImageID != "" {
		imageID = c.ImageID // the image may have been rebuilt meanwhile
	}
	e := pooled{
		sandboxID: sb.ID, secret: sb.AgentSecret, container: c,
		image: sb.Image, imageID: imageID,
		limits: limits{spec.CPUCount, spec.MemoryMB, spec.PidsLimit},
	}
	if !m.pool.put(e, m.cfg.WarmPool) {
		m.discardPooled(ctx, c.ID, sb.ID, "pool full")
		return nil
	}
	m.log.Debug("warm pool container ready", logSandbox, sb.ID, logContainer, c.ID)
	return nil
}

// pooledInitTimeout bounds the init of a claimed container. Its agent was
// answering when it was pooled; one that is silent now died since (an
// engine restart stops every container), and a cold create is quicker
// than waiting out InitTimeout.
const pooledInitTimeout = 2 * time.Second

// createFromPool makes sb out of a pooled container, when one of its
// image is ready. ok is false when none is, or when the pooled container
// failed before the client could see anything of it; the caller then
// creates sb from scratch.
func (m *Manager) createFromPool(ctx context.Context, sb sandbox.Sandbox) (_ sandbox.Sandbox, ok bool, _ error) {
	if m.cfg.WarmPool <= 0 || sb.Image != m.cfg.BaseImage {
		return sb, false, nil
	}
	imageID, err := m.cfg.Runtime.ImageID(ctx, sb.Image)
	if err != nil {
		return sb, false, nil
	}
	e, ok := m.pool.take(sb.Image, imageID)
	if !ok {
		return sb, false, nil
	}
	sb.ID, sb.AgentSecret = e.sandboxID, e.secret
	sb.ContainerID, sb.AgentAddr = e.container.ID, e.container.AgentAddr
	defer m.locks.lock(sb.ID)()
	// Runs before the unlock: by then the store has the sandbox, or its
	// container is gone, so reconcile cannot mistake it for the pool's.
	defer m.pool.setBusy(sb.ID, false)
	log := m.log.With(logSandbox, sb.ID, logTemplate, sb.TemplateID, logContainer, sb.ContainerID)
	if err := m.save(ctx, sb); err != nil {
		m.abandon(ctx, sb)
		return sb, true, err
	}
	if err := m.applyLimits(ctx, e, sb); err != nil {
		log.Warn("pooled container refused its limits; creating from scratch", "err", err)
		m.abandon(ctx, sb)
		return sb, false, nil
	}
	if initFailed, err := m.bringUp(ctx, &sb, e.container.IP, pooledInitTimeout); err != nil {
		m.abandon(ctx, sb)
		if initFailed {
			log.Warn("pooled container's agent init failed; creating from scratch", "err", err)
			return sb, false, nil
		}
		log.Error("sandbox start failed", "err", err)
		return sb, true, err
	}
	m.event(ctx, sb.ID, "info", "sandbox created", "template", sb.TemplateID, "image", sb.Image, "pool", "true")
	log.Info("sandbox created from the warm pool")
	return sb, true, nil
}

// applyLimits gives a claimed container the sandbox's resource limits,
// unless it was made with them.
func (m *Manager) applyLimits(ctx context.Context, e pooled, sb sandbox.Sandbox) error {
	want := limits{sb.CPUCount, sb.MemoryMB, max(m.cfg.PidsLimit, 0)}
	if e.limits == want {
		return nil
	}
	return m.cfg.Runtime.Update(ctx, e.container.ID, want.cpu, want.memMB, want.pids)
}

// reconcilePooled deals with a container labelled as the pool's that no
// live sandbox owns: a sandbox's leftover is removed, one the pool knows
// is left alone, any other is adopted into the pool if it fits, else
// removed.
func (m *Manager) reconcilePooled(ctx context.Context, c sandbox.Container) {
	if c.SandboxID == "" {
		m.discardPooled(ctx, c.ID, "", "no sandbox ID")
		return
	}
	defer m.locks.lock(c.SandboxID)()
	if sb, ok := m.cached(c.SandboxID); ok {
		if sb.ContainerID != c.ID || sb.State == sandbox.StateKilled {
			m.discardPooled(ctx, c.ID, c.SandboxID, "stray of a sandbox")
		}
		return
	}
	if m.pool.knows(c.SandboxID) {
		return
	}
	if reason := m.adoptPooled(ctx, c); reason != "" {
		m.discardPooled(ctx, c.ID, c.SandboxID, reason)
	}
}

// adoptPooled puts a pooled container found on the engine back into the
// pool; it returns why not, or "".
func (m *Manager) adoptPooled(ctx context.Context, c sandbox.Container) string {
	if m.cfg.WarmPool <= 0 {
		return "warm pool disabled"
	}
	c, err := m.cfg.Runtime.Inspect(ctx, c.ID)
	switch {
	case err != nil:
		return "cannot inspect: " + err.Error()
	case !c.Running || c.Paused || c.AgentAddr == "":
		return "not running"
	case c.AgentSecret == "":
		return "no agent secret"
	case c.Labels[sandbox.LabelRuntime] != string(m.cfg.SandboxRuntime) &&
		!(c.Labels[sandbox.LabelRuntime] == "" && m.cfg.SandboxRuntime == sandbox.RuntimeRunc):
		return "of another runtime"
	}
	imageID, err := m.cfg.Runtime.ImageID(ctx, m.cfg.BaseImage)
	if err != nil || imageID != c.ImageID {
		return "not of the current base image"
	}
	e := pooled{sandboxID: c.SandboxID, secret: c.AgentSecret, container: c, image: m.cfg.BaseImage, imageID: imageID}
	if !m.pool.put(e, m.cfg.WarmPool) {
		return "pool full"
	}
	m.log.Info("adopted warm pool container", logSandbox, c.SandboxID, logContainer, c.ID)
	return ""
}

// prunePool drops pooled containers that stopped or vanished. seen is
// the engine's containers as listed; one missing from it may be newer
// than the list, so it is inspected first.
func (m *Manager) prunePool(ctx context.Context, seen map[string]sandbox.Container) {
	dead := map[string]bool{}
	for _, e := range m.pool.entries() {
		c, ok := seen[e.container.ID]
		if !ok {
			var err error
			c, err = m.cfg.Runtime.Inspect(ctx, e.container.ID)
			if err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
				continue
			}
		}
		if !c.Running || c.Paused || c.AgentAddr != e.container.AgentAddr {
			dead[e.container.ID] = true
		}
	}
	if len(dead) == 0 {
		return
	}
	for _, e := range m.pool.drop(func(e pooled) bool { return !dead[e.container.ID] }) {
		m.discardPooled(ctx, e.container.ID, e.sandboxID, "stopped or gone")
	}
	m.pool.wake()
}

// discardPooled removes a pooled container.
func (m *Manager) discardPooled(ctx context.Context, containerID, sandboxID, reason string) {
	m.log.Info("removing warm pool container", logContainer, containerID, logSandbox, sandboxID, "reason", reason)
	err := m.cfg.Runtime.Remove(context.WithoutCancel(ctx), containerID)
	if err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
		m.log.Warn("cannot remove warm pool container", logContainer, containerID, "err", err)
	}
}
