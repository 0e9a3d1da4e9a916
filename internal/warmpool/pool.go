// Package warmpool keeps started containers of templates, their agents up
// but not initialised, so that creating a sandbox skips the engine's
// container start (most of a cold create). It owns the pool's kinds (a
// template's image and agent arguments, and how many to keep), the demand
// auto-sized pools learn from (demand.go) and the memory budget they share,
// the refill loop (refill.go), claims, adoption of pooled containers found
// on the engine, giving way to sandboxes the engine has no room for
// (claim.go), and the gate that creates the pool cannot serve wait at
// (gate.go); the gate's slots and the pool's containers are shared
// between the teams creating at once (teams.go).
//
// It owns no sandbox: the lifecycle manager asks it for a container
// (Claim), makes the sandbox out of it, and tells it of the pooled
// containers reconcile finds. It works through the engine, the agent
// client, the firewall and the store (for the demand it saves), and asks
// the manager's templates what a create of one would run (Templates).
//
// One refill loop serves every kind, making a few containers at once, and
// a kind whose image is not built (the code interpreter's is optional)
// keeps no container until it is. A container's name and hostname are
// fixed when it is made, so each one is made for a sandbox ID chosen in
// advance; the sandbox that claims it takes that ID.
//
// Pooled containers are labelled sandbox.LabelPool and have no record in
// the store until claimed. A claim saves the record before it touches the
// container, so a container with a record is a sandbox's whatever its
// labels say, and one without is the pool's: reconcile adopts it when it
// still fits (running, current image, room in the pool) and removes it
// otherwise; its kind is the one whose image it runs. Close leaves pooled
// containers running (Empty removes them), so a restarted server starts
// with a full pool.
package warmpool

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Auto, as a Builtin's Size, sizes its pool from demand.
const Auto = -1

// ContainerMB is the memory a pooled container is taken to hold when the
// pools are fitted into Settings.BudgetMB, unless its Builtin says
// otherwise: an idle agent and its container (about 10 MiB) rounded up.
const ContainerMB = 16

const (
	// Recheck is how often a full pool checks that its images were not
	// rebuilt, and an optional image's absence that it was built; claims
	// check it anyway.
	Recheck = 15 * time.Second
	// A failing refill waits this long, doubling up to BackoffMax;
	// claims do not cut the wait short.
	backoffMin = time.Second
	BackoffMax = time.Minute
	// CrowdedHold is how long the pools make no container after they
	// gave way to a sandbox the engine had no room for, so that they do
	// not take the room back from it.
	CrowdedHold = time.Minute
)

// DemandStore keeps the demand of auto-sized pools across restarts
// (sandbox.Store is one).
type DemandStore interface {
	SavePoolDemand(ctx context.Context, ds []sandbox.PoolDemand) error
	PoolDemand(ctx context.Context) ([]sandbox.PoolDemand, error)
}

// Templates answers what the pool needs to know of templates, which the
// lifecycle manager resolves.
type Templates interface {
	// Resolve returns what a create of team's template would make now:
	// its TemplateID, Image, AgentArgs, CPUCount and MemoryMB.
	Resolve(ctx context.Context, team, template string) (sandbox.Sandbox, error)
	// Runtime returns the runtime a create of template, whose image is
	// image, would run under; "" = the server's (Settings.Runtime).
	Runtime(ctx context.Context, template, image string) (sandbox.OCIRuntime, error)
}

// Deps are what a Pool works through.
type Deps struct {
	Runtime   sandbox.Runtime // required
	Agent     sandbox.Agent   // required
	Store     DemandStore     // required when a Builtin is Auto
	Templates Templates       // required
	// Firewall writes pooled containers' egress rules (for poolNetwork);
	// nil = none.
	Firewall sandbox.Firewall
	// Logger is used as given (the manager passes its own, so that the
	// pool's lines read as the manager's); nil = discard.
	Logger *slog.Logger
	// CABundle is given to every pooled agent once it answers; "" = none.
	CABundle string
}

// A Builtin is a built-in template whose pool the settings size.
type Builtin struct {
	Template  string
	Image     string
	AgentArgs []string
	// Optional says its image may be absent (`warren image build` makes
	// it on demand); its pool then stays empty, quietly.
	Optional bool
	// Size is how many containers to keep: 0 = none, or Auto, as many as
	// demand asks and never fewer than Floor.
	Size, Floor int
	// MemoryMB is what one of its containers is taken to hold in the
	// budget; 0 = ContainerMB.
	MemoryMB int
}

// Settings are what a Pool keeps and makes.
type Settings struct {
	// Builtin are the built-in templates' pools, served in this order.
	Builtin []Builtin
	// NoPool are the other built-in templates: they never get a pool
	// from demand.
	NoPool []string
	// Learn gives every other template created in the last Window a
	// pool sized from its demand.
	Learn bool
	// BudgetMB bounds the memory, in MiB, that auto-sized pools hold
	// beyond their floors.
	BudgetMB int
	// What pooled containers are made with: the CPUs and memory (MiB) of
	// a template that asks for none, the disk (MiB), the processes
	// (negative = no limit), and the runtime of an image that asks for
	// none.
	CPUCount, MemoryMB, DiskSizeMB, PidsLimit int
	Runtime                                   sandbox.OCIRuntime
	// InitTimeout bounds the wait for a pooled container's agent.
	InitTimeout time.Duration
}

// Pool keeps the warm pool. Create it with New, Start it, Close it.
type Pool struct {
	deps  Deps
	set   Settings
	log   *slog.Logger
	stock *stock
	// demand is what creates asked of the pool, for auto-sized pools.
	demand *demand
	// crowdedUntil holds refills back (UnixNano) after the pools gave way
	// to a sandbox the engine had no room for (see GiveWay).
	crowdedUntil atomic.Int64
	// releasing is held by Release while it lets go of an image, and
	// read-held by every make of a learned pool's container, so that none
	// is in flight then and none starts for the image after it.
	releasing sync.RWMutex
	// cold bounds the creates that make their container on the engine at
	// once (see AdmitCold).
	cold coldGate
	// claims counts the claims in flight, which refills hold back for
	// (holdForCreates).
	claims gauge

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Pool that keeps nothing until Start. When the engine is
// sandbox.Crowdable, the pool gives way on it (GiveWay).
func New(deps Deps, settings Settings) *Pool {
	p := &Pool{
		deps:   deps,
		set:    settings,
		log:    deps.Logger,
		stock:  newStock(),
		demand: newDemand(),
		cold:   newColdGate(),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if c, ok := deps.Runtime.(sandbox.Crowdable); ok {
		c.OnCrowded(p.GiveWay)
	}
	return p
}

// Start takes up the demand saved before a restart (auto-sized pools
// only) and launches the refill loop and the demand's saves, which run
// until Close. Containers reconcile found are adopted before it.
func (p *Pool) Start(ctx context.Context) {
	if p.auto() {
		// Without it the pools start at their floors, as on a first start.
		if err := p.loadDemand(ctx); err != nil {
			p.log.Warn("cannot load the warm pools' demand; the pools start from their floors", "err", err)
		}
	}
	ctx, p.cancel = context.WithCancel(ctx)
	if p.enabled() {
		p.wg.Go(func() { p.refillLoop(ctx) })
	}
	if p.auto() {
		p.wg.Go(func() { every(ctx, SaveInterval, p.saveDemand) })
	}
}

// Close stops the loops and saves the demand. The pooled containers stay:
// Empty removes them.
func (p *Pool) Close() {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	if p.auto() {
		p.saveDemand(context.Background())
	}
}

// Empty removes every pooled container, a few at once.
func (p *Pool) Empty(ctx context.Context) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, p.fillers())
	for _, e := range p.stock.drop(func(pooled) bool { return false }) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p.Discard(ctx, e.container.ID, e.sandboxID, "server stopped with no sandbox")
		})
	}
	wg.Wait()
}

// Ready returns how many pooled containers, of every kind, wait to be
// claimed.
func (p *Pool) Ready() int { return p.stock.len() }

// Stats are the pools' sizes, by template, for every template the pool
// can serve.
type Stats struct {
	// Ready counts the containers waiting, Size how many are kept.
	Ready, Size map[string]int
	// MemoryMB is what the budget counts for the containers beyond the
	// template's floor that wait (auto-sized pools only), BudgetMB the
	// budget they share.
	MemoryMB map[string]int
	BudgetMB int
}

// Stats returns the pools' sizes now.
func (p *Pool) Stats() Stats {
	st := Stats{Ready: map[string]int{}, Size: map[string]int{}, MemoryMB: map[string]int{}, BudgetMB: p.set.BudgetMB}
	for _, k := range p.kinds() {
		ready := p.stock.count(k.template)
		st.Ready[k.template], st.Size[k.template] = ready, k.size
		if !k.pinned {
			st.MemoryMB[k.template] = max(ready-k.floor, 0) * k.costMB()
		}
	}
	return st
}

// kind is what pooled containers are made for: a template's image and
// agent arguments, and how many to keep.
type kind struct {
	template  string // its ID: a Builtin's or a learned one's
	image     string
	agentArgs []string
	size      int
	// floor is the size an auto-sized kind never goes below; pinned is a
	// size the operator gave, which demand and the memory budget leave.
	floor  int
	pinned bool
	// cpuCount and memoryMB are a learned kind's template's resources,
	// which its containers are made with so that a claim need not change
	// them; 0 = Settings'.
	cpuCount, memoryMB int
	// optional kinds' images may be absent: `warren image build` makes
	// them on demand. Their pool then stays empty, quietly.
	optional bool
	// budgetMB is what one container is taken to hold; 0 = ContainerMB.
	budgetMB int
}

// costMB is what one container of k is taken to hold in the budget.
func (k kind) costMB() int {
	if k.budgetMB > 0 {
		return k.budgetMB
	}
	return ContainerMB
}

// kinds returns every kind: the built-in ones, those of size 0 included,
// then, when Settings.Learn, those of the other templates created in the
// last Window (see demand.go).
func (p *Pool) kinds() []kind {
	var kinds []kind
	for _, b := range p.set.Builtin {
		k := kind{template: b.Template, image: b.Image, agentArgs: b.AgentArgs, size: max(b.Size, 0), optional: b.Optional, budgetMB: b.MemoryMB}
		if b.Size == Auto {
			k.floor = b.Floor
			k.size = max(b.Floor, p.demand.want(b.Template))
		} else {
			k.pinned = true
		}
		kinds = append(kinds, k)
	}
	if p.set.Learn {
		kinds = append(kinds, p.demand.learned(p.builtin)...)
	}
	fitBudget(kinds, p.set.BudgetMB)
	return kinds
}

// builtin reports whether template is a built-in one, pooled or not.
func (p *Pool) builtin(template string) bool {
	return slices.ContainsFunc(p.set.Builtin, func(b Builtin) bool { return b.Template == template }) ||
		slices.Contains(p.set.NoPool, template)
}

// auto reports whether a built-in pool is sized from demand.
func (p *Pool) auto() bool {
	return slices.ContainsFunc(p.set.Builtin, func(b Builtin) bool { return b.Size == Auto })
}

// enabled reports whether any kind keeps containers.
func (p *Pool) enabled() bool {
	return slices.ContainsFunc(p.kinds(), func(k kind) bool { return k.size > 0 })
}

// KindOf returns the kind that serves sb, by its template's name: a pool
// of its template, image and agent arguments that is not disabled.
func (p *Pool) KindOf(sb sandbox.Sandbox) (string, bool) {
	if len(sb.VolumeMounts) > 0 {
		return "", false // mounts are fixed at a container's create
	}
	for _, k := range p.kinds() {
		if k.size > 0 && sb.Image == k.image && slices.Equal(sb.AgentArgs, k.agentArgs) && p.serves(k, sb.TemplateID) {
			return k.template, true
		}
	}
	return "", false
}

// demandKind returns the kind whose demand a create of sb counts to: the
// built-in kind that serves it, or its template's own.
func (p *Pool) demandKind(sb sandbox.Sandbox) kind {
	for _, b := range p.set.Builtin {
		if sb.Image == b.Image && slices.Equal(sb.AgentArgs, b.AgentArgs) {
			return kind{template: b.Template, image: b.Image, agentArgs: b.AgentArgs, optional: b.Optional}
		}
	}
	// optional: a template deleted since leaves an image that is gone.
	return kind{template: sb.TemplateID, image: sb.Image, agentArgs: slices.Clone(sb.AgentArgs), optional: true,
		cpuCount: sb.CPUCount, memoryMB: sb.MemoryMB}
}

// serves reports whether kind k serves creates of template: a built-in
// kind serves any template of its image (snapshots of it too, as before
// pools learned), a learned one only its own.
func (p *Pool) serves(k kind, template string) bool {
	return p.builtin(k.template) || k.template == template
}

// target is what a kind's pooled containers must run now.
type target struct {
	imageID string
	runtime sandbox.OCIRuntime
}

// target returns what containers of kind k must run now. ok is false,
// with no error, when k's image is optional and absent.
func (p *Pool) target(ctx context.Context, k kind) (_ target, ok bool, _ error) {
	imageID, err := p.deps.Runtime.ImageID(ctx, k.image)
	if err != nil {
		if k.optional && sandbox.KindOf(err) == sandbox.KindNotFound {
			return target{}, false, nil
		}
		return target{}, false, err
	}
	// What a create of the template would run under (its image's label).
	rt, err := p.deps.Templates.Runtime(ctx, k.template, k.image)
	if err != nil {
		return target{}, false, err
	}
	if rt == "" {
		rt = p.set.Runtime
	}
	return target{imageID: imageID, runtime: rt}, true, nil
}

// Release empties and forgets the learned pools of image, so that the
// image can be removed: a pooled container holds the image it runs. The
// built-in templates' pools are left alone; their images are not removed
// by deleting a snapshot or a template.
func (p *Pool) Release(ctx context.Context, image string) {
	p.releasing.Lock()
	defer p.releasing.Unlock()
	kinds := p.demand.forget(image, p.builtin)
	if len(kinds) == 0 {
		return
	}
	for _, e := range p.stock.drop(func(e pooled) bool { return !slices.Contains(kinds, e.kind) }) {
		p.drop(ctx, e, "its image is being removed")
	}
}

// errReleased is what a make of a learned pool's container returns when
// the pool's demand was forgotten meanwhile (Release, or demand that
// passed): nothing to make.
var errReleased = errors.New("warm pool released")

// fillers bounds the pooled containers made at once, so that a refill
// after a burst neither takes its time one container after another nor
// holds the engine from the creates the pool could not serve: this
// machine's CPUs (a Docker engine starts containers on it), or more where
// the engine starts them elsewhere (sandbox.ParallelStarter: the nodes of
// a cluster).
func (p *Pool) fillers() int {
	n := max(runtime.NumCPU(), 2)
	if ps, ok := p.deps.Runtime.(sandbox.ParallelStarter); ok {
		n = max(n, ps.ParallelStarts())
	}
	return n
}

func every(ctx context.Context, d time.Duration, f func(context.Context)) {
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
