package lifecycle

import (
	"context"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/phases"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Claims from the warm pool, and what reconcile does with pooled
// containers (pool.go keeps and fills the pool).

// pooledInitTimeout bounds the init of a claimed container. Its agent was
// answering when it was pooled; one that is silent now died since (an
// engine restart stops every container), and a cold create is quicker
// than waiting out InitTimeout.
const pooledInitTimeout = 2 * time.Second

// createFromPool makes sb out of a pooled container, when one of its
// kind (image and agent arguments), current image ID and runtime is
// ready. ok is false when none is, or when the pooled container failed
// before the client could see anything of it; the caller then creates sb
// from scratch.
func (m *Manager) createFromPool(ctx context.Context, sb sandbox.Sandbox) (_ sandbox.Sandbox, ok bool, _ error) {
	k, ok := m.poolKindOf(sb)
	if !ok {
		return sb, false, nil
	}
	imageID, err := m.imageID(ctx, sb.Image)
	if err != nil {
		return sb, false, nil
	}
	phases.Mark(ctx, "image_id")
	e, ok := m.pool.take(k.template, imageID, sb.Runtime)
	if !ok {
		return sb, false, nil
	}
	defer m.claims.begin()()
	sb.ID, sb.AgentSecret = e.sandboxID, e.secret
	sb.ContainerID, sb.AgentAddr = e.container.ID, e.container.AgentAddr
	defer m.locks.lock(sb.ID)()
	// Runs before the unlock: by then the store has the sandbox, or its
	// container is gone, so reconcile cannot mistake it for the pool's.
	defer m.pool.setBusy(sb.ID, false)
	log := m.log.With(logkey.Sandbox, sb.ID, logkey.Template, sb.TemplateID, logkey.Container, sb.ContainerID)
	if err := m.save(ctx, sb); err != nil {
		m.abandon(ctx, sb)
		return sb, true, err
	}
	phases.Mark(ctx, "save")
	if err := m.applyLimits(ctx, e, sb); err != nil {
		log.Warn("pooled container refused its limits; creating from scratch", "err", err)
		m.abandon(ctx, sb)
		return sb, false, nil
	}
	phases.Mark(ctx, "limits")
	if initFailed, err := m.bringUp(ctx, &sb, e.container.IP, pooledInitTimeout, e.prepared); err != nil {
		m.abandon(ctx, sb)
		if initFailed {
			log.Warn("pooled container's agent init failed; creating from scratch", "err", err)
			return sb, false, nil
		}
		log.Error("sandbox start failed", "err", err)
		return sb, true, err
	}
	m.event(ctx, sb.ID, "info", "sandbox created", "template", sb.TemplateID, "image", sb.Image, "pool", "true")
	m.record(ctx, sb, sandbox.EventCreated, nil)
	log.Info("sandbox created from the warm pool")
	m.observeCreate(ctx, "pool")
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
// pool of the kind whose current image it runs; it returns why not, or "".
func (m *Manager) adoptPooled(ctx context.Context, c sandbox.Container) string {
	if !m.poolEnabled() {
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
	}
	var kinds []poolKind
	var target poolTarget
	for _, k := range m.poolKinds() {
		if k.size == 0 {
			continue
		}
		if t, ok, err := m.poolTarget(ctx, k); err == nil && ok && t.imageID == c.ImageID {
			kinds, target = append(kinds, k), t
		}
	}
	switch {
	case len(kinds) == 0:
		return "of no image the pool keeps now"
	case len(kinds) > 1:
		// The image does not tell which agent arguments it runs with.
		return "its image serves more than one template"
	}
	rt := sandbox.OCIRuntime(c.Labels[sandbox.LabelRuntime])
	if rt == "" {
		rt = sandbox.RuntimeRunc // made before containers had the label
	}
	if rt != target.runtime {
		return "of another runtime"
	}
	k := kinds[0]
	e := pooled{kind: k.template, sandboxID: c.SandboxID, secret: c.AgentSecret, container: c, imageID: c.ImageID, runtime: rt}
	if err := m.preparePooled(ctx, e); err != nil {
		return "its network rules failed: " + err.Error()
	}
	if !m.pool.put(e, k.size) {
		m.removeEgress(ctx, e.sandboxID)
		return "pool full"
	}
	m.log.Info("adopted warm pool container", logkey.Template, k.template, logkey.Sandbox, c.SandboxID, logkey.Container, c.ID)
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
		m.dropPooled(ctx, e, "stopped or gone")
	}
	m.pool.wake()
}

// poolNetwork is the network a pooled container's egress rules are
// written for before it is claimed: the one most creates ask for (the
// SDKs' default, internet access and no lists). A claim asking for it
// renders the chains as they are already written, so the firewall has
// nothing to write on the claim's path; any other network is written
// then. Until it is claimed, a pooled container runs the agent only.
var poolNetwork = sandbox.Network{AllowInternetAccess: true}

// preparePooled writes the egress rules of a container about to be put in
// the pool, for poolNetwork. Put it in the pool only after: a claim's own
// rules must come after these, never before.
func (m *Manager) preparePooled(ctx context.Context, e pooled) error {
	return m.applyEgress(ctx, sandbox.Sandbox{ID: e.sandboxID, Network: poolNetwork}, e.container.IP)
}

// dropPooled removes a container the pool held, and its egress rules.
func (m *Manager) dropPooled(ctx context.Context, e pooled, reason string) {
	m.discardPooled(ctx, e.container.ID, e.sandboxID, reason)
	m.removeEgress(ctx, e.sandboxID)
}

// discardPooled removes a pooled container.
func (m *Manager) discardPooled(ctx context.Context, containerID, sandboxID, reason string) {
	m.log.Info("removing warm pool container", logkey.Container, containerID, logkey.Sandbox, sandboxID, "reason", reason)
	err := m.cfg.Runtime.Remove(context.WithoutCancel(ctx), containerID)
	if err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
		m.log.Warn("cannot remove warm pool container", logkey.Container, containerID, "err", err)
	}
}
