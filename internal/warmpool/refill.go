package warmpool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// refillLoop keeps the pool full until ctx ends.
func (p *Pool) refillLoop(ctx context.Context) {
	var backoff time.Duration
	for {
		wait, kick := Recheck, p.stock.kick
		if err := p.refill(ctx); err != nil && ctx.Err() == nil {
			level := slog.LevelWarn // once per run of failures
			if backoff > 0 {
				level = slog.LevelDebug
			}
			backoff = min(max(2*backoff, backoffMin), BackoffMax)
			wait, kick = backoff, nil // a nil channel never fires
			p.log.Log(ctx, level, "warm pool refill failed", "err", err, "retry_in", backoff)
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

// refill discards pooled containers of an outdated image, and those
// beyond their kind's size (demand has passed, or the template is no
// longer in use), and makes new ones until every kind is full, up to
// fillers at once, taking the kinds in turn so that none waits for all of
// another's. A kind that fails does not stop the others.
func (p *Pool) refill(ctx context.Context) error {
	kinds := p.kinds()
	p.dropSurplus(ctx, kinds)
	r := p.newPass(ctx)
	for _, k := range kinds {
		if k.size > 0 {
			r.takeUp(k)
		}
	}
	if until := p.crowdedUntil.Load(); time.Now().UnixNano() < until {
		p.log.Debug("warm pool: the engine was out of room for a sandbox; no refill until the hold ends",
			"until", time.Unix(0, until))
		return r.err()
	}
	r.run()
	return r.err()
}

// dropSurplus removes the containers of kinds no longer kept, and those
// above their kind's size, the newest first.
func (p *Pool) dropSurplus(ctx context.Context, kinds []kind) {
	if slices.ContainsFunc(p.stock.entries(), surplus(kinds, p.stock)) {
		// A removal takes the engine's time too, which the creates and
		// claims in flight need more: the first create of a template
		// whose share of the budget comes out of another's pool would
		// otherwise wait for that pool's removal. Claims may take some
		// of the surplus meanwhile.
		p.holdForCreates(ctx, time.Now().Add(ClaimHold))
	}
	for _, e := range p.stock.dropNewest(surplus(kinds, p.stock)) {
		p.drop(ctx, e, "more than the pool keeps now")
	}
}

// surplus returns a function that accepts the containers of a kind not in
// kinds or of size 0, and as many of the others as their kind holds
// beyond its size now: asked of the newest first (stock.dropNewest),
// those go first.
func surplus(kinds []kind, s *stock) func(pooled) bool {
	kept, excess := map[string]int{}, map[string]int{}
	for _, k := range kinds {
		kept[k.template] = k.size
		excess[k.template] = s.count(k.template) - k.size
	}
	return func(e pooled) bool {
		size, ok := kept[e.kind]
		if !ok || size == 0 {
			return true
		}
		if excess[e.kind] > 0 {
			excess[e.kind]--
			return true
		}
		return false
	}
}

// dropOutdated removes k's containers that do not run its target t (all
// of them when its image is absent: ok false).
func (p *Pool) dropOutdated(ctx context.Context, k kind, t target, ok bool) {
	outdated := func(e pooled) bool {
		return e.kind == k.template && (!ok || e.imageID != t.imageID || e.runtime != t.runtime)
	}
	for _, e := range p.stock.drop(func(e pooled) bool { return !outdated(e) }) {
		p.drop(ctx, e, "image rebuilt or removed")
	}
}

// fill is a kind a pass makes containers of, and what they run.
type fill struct {
	kind   kind
	target target
}

// A pass is one refill's making of containers: the kinds it fills, and
// what it has in flight.
type pass struct {
	p       *Pool
	ctx     context.Context
	fills   []fill
	takenUp map[string]bool // the kinds taken up (takeUp) in the pass

	mu       sync.Mutex // guards failed, making, made, inFlight and errs
	failed   map[string]bool
	making   map[string]int
	made     map[string]bool
	inFlight int
	errs     []error

	wg    sync.WaitGroup
	slots chan struct{} // one for each container made at once
	// done tells the pass that a container is made (or failed).
	done chan struct{}
	// holdUntil ends the pass's hold for claims and creates
	// (holdForCreates), ClaimHold after its first.
	holdUntil time.Time
}

func (p *Pool) newPass(ctx context.Context) *pass {
	return &pass{p: p, ctx: ctx, takenUp: map[string]bool{}, failed: map[string]bool{}, making: map[string]int{},
		made: map[string]bool{}, slots: make(chan struct{}, p.fillers()), done: make(chan struct{}, 1)}
}

func (r *pass) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *pass) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// takeUp drops k's containers of an outdated image and adds k to the
// fills, or records the error that keeps it out. It is called once for
// each kind in a pass.
func (r *pass) takeUp(k kind) {
	r.takenUp[k.template] = true
	t, ok, err := r.p.target(r.ctx, k)
	if err != nil {
		r.fail(fmt.Errorf("%s: %w", k.template, err))
		return
	}
	r.p.dropOutdated(r.ctx, k, t, ok)
	if !ok {
		r.p.log.Debug("warm pool: image not built; keeping none until it is", logkey.Template, k.template, logkey.Image, k.image)
		return
	}
	r.fills = append(r.fills, fill{kind: k, target: t})
}

// run makes containers until every kind is full or failed, or ctx ends.
func (r *pass) run() {
	for more := true; more && r.ctx.Err() == nil; {
		started, refused := r.startMakes()
		switch {
		case started:
		case r.busy():
			r.awaitChange()
		case refused:
			r.awaitShare()
		default:
			// Nothing in flight: claims may have taken what was made.
			more = r.short()
		}
	}
	r.wg.Wait()
}

// startMakes starts making a container of each kind that is not full,
// and reports whether it started any, and whether a make was refused
// a slot of a bursting team's share (slot).
func (r *pass) startMakes() (started, refused bool) {
	for _, f := range r.fills {
		if !r.reserve(f.kind) {
			continue
		}
		if r.holdUntil.IsZero() {
			r.holdUntil = time.Now().Add(ClaimHold)
		}
		r.p.holdForCreates(r.ctx, r.holdUntil)
		release, ok, share := r.slot(f.kind)
		if !ok {
			r.unreserve(f.kind)
			refused = refused || share
			continue
		}
		started = true
		r.wg.Go(func() { r.make(f, release) })
	}
	return started, refused
}

// slot takes a slot for a make of k, reserved: one of the pass's own
// (fillers), else one the cold gate's shares leave free (takeSpare); ok
// is false when neither is free. While several teams create, a make
// beyond the containers kept for the teams besides the one that holds
// the most of the gate (heaviest) is for that team's claims, which take
// every other: it takes a slot of that team's share as the team's creates
// and removals do (share is true), or none. A burst then keeps to its
// share of the engine, refill included, instead of starting containers
// for itself in the fillers' and the other teams' slots on top of it,
// which the other teams' claims, commands and starts waited behind.
func (r *pass) slot(k kind) (release func(), ok, share bool) {
	if heavy := r.p.cold.heaviest(); heavy != "" && r.beyond(k, heavy) {
		release, ok = r.p.cold.takeShare(heavy)
		return release, ok, true
	}
	select {
	case r.slots <- struct{}{}:
		return func() { <-r.slots }, true, false
	default:
	}
	release, ok = r.p.cold.takeSpare()
	return release, ok, false
}

// beyond reports whether k's pool holds, ready and in the making, what
// it keeps for the teams creating besides heavy: ready, the creates they
// began within a refill of k's pool, and a spare while a refill takes
// longer than rateSpan (as the demand's size has, and for the same
// reason: a team whose rate has just begun to count would find the one
// kept for it claimed and its replacement not yet made); and as many in
// the making, which is what a steady rate claims within a refill.
func (r *pass) beyond(k kind, heavy string) bool {
	r.mu.Lock()
	making := r.making[k.template] - 1 // this make's own reservation
	r.mu.Unlock()
	span := r.p.refillSpan(k.template)
	kept := r.p.cold.teams.besides(heavy, span)
	if span > rateSpan {
		kept++
	}
	return r.p.stock.count(k.template)+making >= 2*kept
}

// SharePoll is how often a pass that the shares left no slot, with
// nothing in flight, asks again: a slot that a team's create or removal
// gives back tells no one.
const SharePoll = 100 * time.Millisecond

// awaitShare waits, when the shares left the pass no slot and nothing is
// in flight, until claims take some, the gate has slots to lend, or
// SharePoll has passed.
func (r *pass) awaitShare() {
	t := time.NewTimer(SharePoll)
	defer t.Stop()
	select {
	case <-r.p.stock.kick:
	case <-r.p.cold.spared:
	case <-t.C:
	case <-r.ctx.Done():
	}
}

// reserve counts a container of k in the making unless k is full; it
// reports whether it did.
func (r *pass) reserve(k kind) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A kind makes one container before it makes several, so that a
	// failing engine sees one attempt per refill; unless its latest one
	// was made, so that a refill after claims replaces them all at once.
	full := r.failed[k.template] || r.p.stock.count(k.template)+r.making[k.template] >= k.size ||
		!r.made[k.template] && r.making[k.template] > 0 && !r.p.stock.madeOK(k.template)
	if full {
		return false
	}
	r.making[k.template]++
	r.inFlight++
	return true
}

// unreserve undoes a reserve of k whose make did not start.
func (r *pass) unreserve(k kind) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.making[k.template]--
	r.inFlight--
}

// make makes one container of f, in a slot that release gives back, and
// records how it went.
func (r *pass) make(f fill, release func()) {
	defer release()
	k := f.kind.template
	err := r.p.makePooled(r.ctx, f.kind, f.target)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.making[k]--
	r.inFlight--
	switch {
	case errors.Is(err, errReleased):
		r.failed[k] = true
	case err != nil:
		r.errs = append(r.errs, fmt.Errorf("%s: %w", k, err))
		r.failed[k] = true
	default:
		r.made[k] = true
	}
	r.p.stock.setMade(k, err == nil)
	select {
	case r.done <- struct{}{}:
	default:
	}
}

func (r *pass) busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight > 0
}

// awaitChange waits until a container is made (a kind's first lets it
// make several), the cold gate has slots to lend (takeSpare), or claims
// take some (the pool must not wait for every
// container in flight before it replaces them: on an engine whose starts
// take seconds, back-to-back creates would drain it); then it takes up
// the kinds demand grew or made meanwhile (a pass lasts as long as
// creates keep claiming).
func (r *pass) awaitChange() {
	select {
	case <-r.done:
	case <-r.p.stock.kick:
	case <-r.p.cold.spared:
	case <-r.ctx.Done():
	}
	sizes := map[string]int{}
	for _, k := range r.p.kinds() {
		sizes[k.template] = k.size
		if k.size > 0 && !r.takenUp[k.template] {
			r.takeUp(k)
		}
	}
	for i := range r.fills {
		r.fills[i].kind.size = sizes[r.fills[i].kind.template]
	}
}

// short reports whether a kind that did not fail holds fewer containers
// than its size.
func (r *pass) short() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.fills, func(f fill) bool {
		return !r.failed[f.kind.template] && r.p.stock.count(f.kind.template) < f.kind.size
	})
}

// makePooled creates and starts one pooled container of kind k, and puts
// it in the pool.
func (p *Pool) makePooled(ctx context.Context, k kind, t target) error {
	spec := p.spec(k, t)
	if !p.builtin(k.template) {
		p.releasing.RLock()
		defer p.releasing.RUnlock()
		if !p.demand.knows(k.template) {
			return errReleased
		}
	}
	p.stock.setBusy(spec.SandboxID, true)
	defer p.stock.setBusy(spec.SandboxID, false)
	e, err := p.start(ctx, k, t, spec)
	if err != nil {
		return err
	}
	if !p.stock.put(e, k.size) {
		p.drop(ctx, e, "pool full")
		return nil
	}
	p.log.Debug("warm pool container ready", logkey.Template, k.template, logkey.Sandbox, e.sandboxID, logkey.Container, e.container.ID)
	return nil
}

// spec is what a container of kind k is made with: a template's own
// resources, or the server's.
func (p *Pool) spec(k kind, t target) sandbox.ContainerSpec {
	return sandbox.ContainerSpec{
		SandboxID:   sandbox.NewID(),
		Image:       k.image,
		Runtime:     t.runtime,
		Labels:      map[string]string{sandbox.LabelPool: "true"},
		CPUCount:    cmp.Or(k.cpuCount, p.set.CPUCount),
		MemoryMB:    cmp.Or(k.memoryMB, p.set.MemoryMB),
		PidsLimit:   max(p.set.PidsLimit, 0),
		DiskMB:      p.set.DiskSizeMB,
		AgentSecret: sandbox.NewToken(),
		AgentArgs:   slices.Clone(k.agentArgs),
	}
}

// start makes the container of spec, waits for its agent and writes its
// egress rules; on error it leaves nothing behind.
func (p *Pool) start(ctx context.Context, k kind, t target, spec sandbox.ContainerSpec) (pooled, error) {
	t0 := time.Now()
	c, err := p.deps.Runtime.Create(ctx, spec)
	if err != nil {
		return pooled{}, err
	}
	imageID := t.imageID
	if c.ImageID != "" {
		imageID = c.ImageID // the image may have been rebuilt meanwhile
	}
	if err := p.prepareAgent(ctx, c.AgentAddr, spec.AgentSecret); err != nil {
		p.Discard(ctx, c.ID, spec.SandboxID, "its agent did not answer or refused the CA")
		return pooled{}, err
	}
	p.demand.refilled(k.template, time.Since(t0))
	e := pooled{
		kind: k.template, sandboxID: spec.SandboxID, secret: spec.AgentSecret, container: c,
		imageID: imageID, runtime: spec.Runtime,
		limits:   limits{spec.CPUCount, spec.MemoryMB, spec.PidsLimit},
		prepared: true,
	}
	if err := p.prepare(ctx, e); err != nil {
		p.Discard(ctx, c.ID, spec.SandboxID, "its network rules failed")
		return pooled{}, err
	}
	return e, nil
}

// prepareAgent readies a pooled container's agent for a claim that is one
// request: it waits for the agent's first answer, then gives it the
// server's CA (an init of that alone, whose install into the trust store
// is the costly part of an init: the bundle's copy and append).
func (p *Pool) prepareAgent(ctx context.Context, addr, secret string) error {
	ctx, cancel := context.WithTimeout(ctx, p.set.InitTimeout)
	defer cancel()
	if err := p.deps.Agent.WaitReady(ctx, addr); err != nil {
		return err
	}
	if p.deps.CABundle == "" {
		return nil
	}
	return p.deps.Agent.Init(ctx, addr, sandbox.AgentInit{AgentSecret: secret, CABundle: p.deps.CABundle, Answered: true})
}
