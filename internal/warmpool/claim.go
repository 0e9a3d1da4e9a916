package warmpool

import (
	"context"
	"errors"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Claims from the pool, what reconcile does with pooled containers, and
// how the pool gives way on a full engine (refill.go fills it).

// A Claim is a pooled container taken for a sandbox, which takes its
// sandbox ID and agent secret. Until Settled, reconcile leaves the
// container alone; Done ends the claim for the refills that wait for
// claims to pass.
type Claim struct {
	SandboxID   string
	AgentSecret string
	Container   sandbox.Container
	// Prepared says the agent answered and took the server's CA when it
	// was pooled, so an init needs neither wait nor CA; false for an
	// adopted container.
	Prepared bool

	limits limits
	pool   *Pool
	end    func()
}

// Claim takes for a create of team the oldest container of kind (KindOf)
// that runs imageID under rt, if one waits, and unless it is one of the
// last few kept for other teams: a claim leaves, for each team creating
// now (Begin) that has fewer creates in flight than team, as many as
// that team began within a refill of the pool (teams.kept), so that a
// team's burst does not take every container the refill readies while
// another team creates one at a time. A miss too wakes the refill: the
// pool may need refilling with a new image.
func (p *Pool) Claim(team, kind, imageID string, rt sandbox.OCIRuntime) (*Claim, bool) {
	e, ok := p.stock.take(kind, imageID, rt, p.cold.teams.kept(team, p.refillSpan(kind)))
	if !ok {
		return nil, false
	}
	return &Claim{SandboxID: e.sandboxID, AgentSecret: e.secret, Container: e.container, Prepared: e.prepared,
		limits: e.limits, pool: p, end: p.claims.begin()}, true
}

// Settled tells the pool that the claimed sandbox's record is saved, or
// its container gone: reconcile may judge the container from then on.
// Call it before the sandbox's lock is released.
func (c *Claim) Settled() { c.pool.stock.setBusy(c.SandboxID, false) }

// Done ends the claim.
func (c *Claim) Done() { c.end() }

// Fit gives the claimed container a sandbox's CPUs and memory (MiB) and
// the server's process limit, unless it was made with them.
func (c *Claim) Fit(ctx context.Context, cpuCount, memoryMB int) error {
	want := limits{cpuCount, memoryMB, max(c.pool.set.PidsLimit, 0)}
	if c.limits == want {
		return nil
	}
	return c.pool.deps.Runtime.Update(ctx, c.Container.ID, want.cpu, want.memMB, want.pids)
}

// Adopt deals with a container labelled as the pool's that no live
// sandbox owns (reconcile found it): one the pool knows is left alone,
// any other is put back into the pool of the kind whose current image it
// runs if it fits, else removed.
func (p *Pool) Adopt(ctx context.Context, c sandbox.Container) {
	if p.stock.knows(c.SandboxID) {
		return
	}
	if reason := p.adopt(ctx, c); reason != "" {
		p.Discard(ctx, c.ID, c.SandboxID, reason)
	}
}

// adopt puts c into the pool; it returns why not, or "".
func (p *Pool) adopt(ctx context.Context, c sandbox.Container) string {
	if !p.enabled() {
		return "warm pool disabled"
	}
	c, err := p.deps.Runtime.Inspect(ctx, c.ID)
	switch {
	case err != nil:
		return "cannot inspect: " + err.Error()
	case !c.Running || c.Paused || c.AgentAddr == "":
		return "not running"
	case c.AgentSecret == "":
		return "no agent secret"
	}
	k, t, reason := p.kindRunning(ctx, c.ImageID)
	if reason != "" {
		return reason
	}
	rt := sandbox.OCIRuntime(c.Labels[sandbox.LabelRuntime])
	if rt == "" {
		rt = sandbox.RuntimeRunc // made before containers had the label
	}
	if rt != t.runtime {
		return "of another runtime"
	}
	e := pooled{kind: k.template, sandboxID: c.SandboxID, secret: c.AgentSecret, container: c, imageID: c.ImageID, runtime: rt}
	if err := p.prepare(ctx, e); err != nil {
		return "its network rules failed: " + err.Error()
	}
	if !p.stock.put(e, k.size) {
		p.removeEgress(ctx, e.sandboxID)
		return "pool full"
	}
	p.log.Info("adopted warm pool container", logkey.Template, k.template, logkey.Sandbox, c.SandboxID, logkey.Container, c.ID)
	return ""
}

// kindRunning returns the one kind kept now whose current image is
// imageID, and its target; or why there is none.
func (p *Pool) kindRunning(ctx context.Context, imageID string) (kind, target, string) {
	var kinds []kind
	var tg target
	for _, k := range p.kinds() {
		if k.size == 0 {
			continue
		}
		if t, ok, err := p.target(ctx, k); err == nil && ok && t.imageID == imageID {
			kinds, tg = append(kinds, k), t
		}
	}
	switch {
	case len(kinds) == 0:
		return kind{}, target{}, "of no image the pool keeps now"
	case len(kinds) > 1:
		// The image does not tell which agent arguments it runs with.
		return kind{}, target{}, "its image serves more than one template"
	}
	return kinds[0], tg, ""
}

// Prune drops pooled containers that stopped or vanished. seen is the
// engine's containers as listed; one missing from it may be newer than
// the list, so it is inspected first.
func (p *Pool) Prune(ctx context.Context, seen map[string]sandbox.Container) {
	dead := map[string]bool{}
	for _, e := range p.stock.entries() {
		c, ok := seen[e.container.ID]
		if !ok {
			var err error
			c, err = p.deps.Runtime.Inspect(ctx, e.container.ID)
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
	for _, e := range p.stock.drop(func(e pooled) bool { return !dead[e.container.ID] }) {
		p.drop(ctx, e, "stopped or gone")
	}
	p.stock.wake()
}

// ContainerChanged prunes the pool when the engine reports a change to a
// container that waits in it.
func (p *Pool) ContainerChanged(ctx context.Context, containerID string) {
	if p.stock.holds(containerID) {
		p.Prune(ctx, nil)
	}
}

// GiveWay frees room on the engine for a sandbox that finds none: it
// removes the newest idle pooled container of the kind that holds the most
// (sandbox.Crowdable), and holds refills back for CrowdedHold. It reports
// whether it removed one.
func (p *Pool) GiveWay(ctx context.Context) bool {
	p.crowdedUntil.Store(time.Now().Add(CrowdedHold).UnixNano())
	most, n := "", 0
	for _, e := range p.stock.entries() {
		if c := p.stock.count(e.kind); c > n {
			most, n = e.kind, c
		}
	}
	taken := false
	gone := p.stock.dropNewest(func(e pooled) bool {
		if taken || e.kind != most {
			return false
		}
		taken = true
		return true
	})
	for _, e := range gone {
		p.drop(ctx, e, "the engine has no room for a sandbox")
	}
	return len(gone) > 0
}

// poolNetwork is the network a pooled container's egress rules are
// written for before it is claimed: the one most creates ask for (the
// SDKs' default, internet access and no lists). A claim asking for it
// renders the chains as they are already written, so the firewall has
// nothing to write on the claim's path; any other network is written
// then. Until it is claimed, a pooled container runs the agent only.
var poolNetwork = sandbox.Network{AllowInternetAccess: true}

// prepare writes the egress rules of a container about to be put in the
// pool, for poolNetwork. Put it in the pool only after: a claim's own
// rules must come after these, never before.
func (p *Pool) prepare(ctx context.Context, e pooled) error {
	if p.deps.Firewall == nil {
		return nil
	}
	err := p.deps.Firewall.Apply(ctx, e.sandboxID, sandbox.Egress{IP: e.container.IP, Network: poolNetwork})
	var se *sandbox.Error
	if err == nil || errors.As(err, &se) {
		return err
	}
	return sandbox.Wrap(sandbox.KindInternal, err, "failed to apply the sandbox's network rules")
}

// removeEgress deletes a pooled container's egress rules.
func (p *Pool) removeEgress(ctx context.Context, id string) {
	if p.deps.Firewall == nil {
		return
	}
	if err := p.deps.Firewall.Remove(context.WithoutCancel(ctx), id); err != nil {
		p.log.Error("cannot remove the sandbox's network rules", logkey.Sandbox, id, "err", err)
	}
}

// drop removes a container the pool held, and its egress rules.
func (p *Pool) drop(ctx context.Context, e pooled, reason string) {
	p.Discard(ctx, e.container.ID, e.sandboxID, reason)
	p.removeEgress(ctx, e.sandboxID)
}

// Discard removes a pooled container (or one labelled as the pool's),
// saying why in the log.
func (p *Pool) Discard(ctx context.Context, containerID, sandboxID, reason string) {
	p.log.Info("removing warm pool container", logkey.Container, containerID, logkey.Sandbox, sandboxID, "reason", reason)
	err := p.deps.Runtime.Remove(context.WithoutCancel(ctx), containerID)
	if err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
		p.log.Warn("cannot remove warm pool container", logkey.Container, containerID, "err", err)
	}
}
