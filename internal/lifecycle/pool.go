package lifecycle

import (
	"context"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/phases"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/warmpool"
)

// The warm pool (internal/warmpool) keeps started containers of templates
// so that creating a sandbox skips the engine's container start:
// Settings.WarmPool of the base template, and Settings.WarmPoolCodeInterpreter
// of code-interpreter-v1, whose agents start their kernels at boot, so a
// claimed one runs its first code without waiting for python's start.
// Auto-sized pools follow demand, and every other template created lately
// gets one. The manager counts its creates in the pool's demand, claims
// from it, makes the sandbox out of the claimed container, and hands it
// the pooled containers reconcile finds.

// WarmPoolAuto, as Settings.WarmPool or WarmPoolCodeInterpreter, sizes
// the pool from demand.
const WarmPoolAuto = warmpool.Auto

// The floors of the auto-sized pools of base and code-interpreter-v1
// (Settings.WarmPool and WarmPoolCodeInterpreter). One code-interpreter
// container holds idle python and javascript kernels, about 75 MiB.
const (
	DefaultWarmPool                = 2
	DefaultWarmPoolCodeInterpreter = 1
)

// codeInterpreterPoolMB is what a pooled code-interpreter container is
// taken to hold in the pools' budget: its idle python and javascript
// kernels, about 75 MiB.
const codeInterpreterPoolMB = 80

// WarmPoolMemoryShare is the share of the machine's memory (MemTotal) that
// auto-sized pools may hold beyond their floors by default.
const WarmPoolMemoryShare = 1.0 / 16

// DefaultWarmPoolMemoryMB is WarmPoolMemoryShare of this machine's memory,
// at least 256 MiB; 1024 where it cannot be read.
func DefaultWarmPoolMemoryMB() int {
	kb, ok := memTotalKB("/proc/meminfo")
	if !ok {
		return 1024
	}
	return max(int(float64(kb)/1024*WarmPoolMemoryShare), 256)
}

// newPool returns the warm pool of m's settings.
func (m *Manager) newPool() *warmpool.Pool {
	s := m.cfg.Settings
	var builtin []warmpool.Builtin
	for _, k := range []struct {
		template    string
		size, floor int
		memoryMB    int
	}{
		{BaseTemplate, s.WarmPool, DefaultWarmPool, 0},
		{CodeInterpreterTemplate, s.WarmPoolCodeInterpreter, DefaultWarmPoolCodeInterpreter, codeInterpreterPoolMB},
	} {
		tpl, build, _ := m.builtinTemplate(k.template)
		builtin = append(builtin, warmpool.Builtin{Template: k.template, Image: tpl.image, AgentArgs: tpl.agentArgs,
			Optional: build != "", Size: k.size, Floor: k.floor, MemoryMB: k.memoryMB})
	}
	return warmpool.New(warmpool.Deps{
		Runtime:   m.cfg.Runtime,
		Agent:     m.cfg.Agent,
		Store:     m.cfg.Store,
		Templates: poolTemplates{m},
		Firewall:  m.cfg.Firewall,
		Logger:    m.log,
		CABundle:  m.cfg.CABundle,
	}, warmpool.Settings{
		Builtin:     builtin,
		NoPool:      []string{MCPGatewayTemplate},
		Learn:       s.WarmPool == WarmPoolAuto,
		BudgetMB:    s.WarmPoolMemoryMB,
		CPUCount:    s.CPUCount,
		MemoryMB:    s.MemoryMB,
		DiskSizeMB:  s.DiskSizeMB,
		PidsLimit:   s.PidsLimit,
		Runtime:     s.SandboxRuntime,
		InitTimeout: s.InitTimeout,
	})
}

// poolTemplates answers the pool's questions about templates
// (warmpool.Templates) as a create would.
type poolTemplates struct{ m *Manager }

func (t poolTemplates) Resolve(ctx context.Context, team, ref string) (sandbox.Sandbox, error) {
	tpl, err := t.m.resolveTemplate(ctx, team, ref)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	sb := sandbox.Sandbox{TemplateID: tpl.id, Image: tpl.image, AgentArgs: tpl.agentArgs}
	sb.CPUCount, sb.MemoryMB = t.m.resourcesOf(tpl)
	return sb, nil
}

func (t poolTemplates) Runtime(ctx context.Context, id, image string) (sandbox.OCIRuntime, error) {
	return t.m.requiredRuntime(ctx, template{id: id, image: image})
}

// WarmPoolReady returns how many pooled containers, of every kind, wait
// to be claimed; ServerStats counts them by template.
func (m *Manager) WarmPoolReady() int { return m.pool.Ready() }

// ReleasePool empties and forgets the learned pools of image, so that the
// image can be removed (warmpool.Pool.Release).
func (m *Manager) ReleasePool(ctx context.Context, image string) { m.pool.Release(ctx, image) }

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
	kind, ok := m.pool.KindOf(sb)
	if !ok {
		return sb, false, nil
	}
	imageID, err := m.imageID(ctx, sb.Image)
	if err != nil {
		return sb, false, nil
	}
	phases.Mark(ctx, "image_id")
	c, ok := m.pool.Claim(sb.TeamID, kind, imageID, sb.Runtime)
	if !ok {
		return sb, false, nil
	}
	defer c.Done()
	sb.ID, sb.AgentSecret = c.SandboxID, c.AgentSecret
	sb.ContainerID, sb.AgentAddr = c.Container.ID, c.Container.AgentAddr
	defer m.locks.lock(sb.ID)()
	// Runs before the unlock: by then the store has the sandbox, or its
	// container is gone, so reconcile cannot mistake it for the pool's.
	defer c.Settled()
	log := m.log.With(logkey.Sandbox, sb.ID, logkey.Team, sb.TeamID, logkey.Template, sb.TemplateID, logkey.Container, sb.ContainerID)
	if err := m.save(ctx, sb); err != nil {
		m.abandon(ctx, sb)
		return sb, true, err
	}
	phases.Mark(ctx, "save")
	if err := c.Fit(ctx, sb.CPUCount, sb.MemoryMB); err != nil {
		log.Warn("pooled container refused its limits; creating from scratch", "err", err)
		m.abandon(ctx, sb)
		return sb, false, nil
	}
	phases.Mark(ctx, "limits")
	if initFailed, err := m.bringUp(ctx, &sb, c.Container.IP, pooledInitTimeout, agentStart{prepared: c.Prepared}); err != nil {
		m.abandon(ctx, sb)
		if initFailed {
			log.Warn("pooled container's agent init failed; creating from scratch", "err", err)
			return sb, false, nil
		}
		log.Error("sandbox start failed", "err", err)
		return sb, true, err
	}
	m.event(ctx, sb.ID, "info", "sandbox created", "template", sb.TemplateID, "image", sb.Image, "pool", "true")
	log.Info("sandbox created from the warm pool", "phases", phases.From(ctx).String())
	m.observeCreate(ctx, "pool")
	return sb, true, nil
}

// reconcilePooled deals with a container labelled as the pool's that no
// live sandbox owns: a sandbox's leftover is removed, and any other is
// the pool's to adopt or remove.
func (m *Manager) reconcilePooled(ctx context.Context, c sandbox.Container) {
	if c.SandboxID == "" {
		m.pool.Discard(ctx, c.ID, "", "no sandbox ID")
		return
	}
	defer m.locks.lock(c.SandboxID)()
	if sb, ok := m.cached(c.SandboxID); ok {
		if sb.ContainerID != c.ID || sb.State == sandbox.StateKilled {
			m.pool.Discard(ctx, c.ID, c.SandboxID, "stray of a sandbox")
		}
		return
	}
	m.pool.Adopt(ctx, c)
}
