package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// The warm pool keeps started containers of templates, their agents up
// but not initialised, so that creating a sandbox skips the engine's
// container start (most of a cold create): Settings.WarmPool of the base
// template, and Settings.WarmPoolCodeInterpreter of code-interpreter-v1,
// whose agents start their kernels at boot, so a claimed one runs its
// first code without waiting for python's start. Auto-sized pools follow
// demand, and every other template created lately gets one (pool_size.go).
// Each kind is a template's image and agent arguments; one refill loop
// serves every kind, making a few containers at once, and a kind whose
// image is not built (the code interpreter's is optional) keeps no
// container until it is.
// A container's name and hostname are fixed when it is made, so each one
// is made for a sandbox ID chosen in advance; the sandbox that claims it
// takes that ID.
//
// Pooled containers are labelled sandbox.LabelPool and have no record in
// the store until claimed. A claim saves the record before it touches the
// container, so a container with a record is a sandbox's whatever its
// labels say, and one without is the pool's: reconcile adopts it when it
// still fits (running, current image, room in the pool) and removes it
// otherwise; its kind is the one whose image it runs. Close leaves pooled
// containers running while sandboxes live, so a restarted server starts
// with a full pool.

// The floors of the auto-sized pools of base and code-interpreter-v1
// (Settings.WarmPool and WarmPoolCodeInterpreter). One code-interpreter
// container holds idle python and javascript kernels, about 75 MiB.
const (
	DefaultWarmPool                = 2
	DefaultWarmPoolCodeInterpreter = 1
)

const (
	// poolRecheck is how often a full pool checks that its images were
	// not rebuilt, and an optional image's absence that it was built;
	// claims check it anyway.
	poolRecheck = 15 * time.Second
	// A failing refill waits this long, doubling up to the maximum;
	// claims do not cut the wait short.
	poolBackoffMin = time.Second
	poolBackoffMax = time.Minute
	// poolCrowdedHold is how long the pools make no container after they
	// gave way to a sandbox the engine had no room for, so that they do
	// not take the room back from it.
	poolCrowdedHold = time.Minute
)

// poolKind is what pooled containers are made for: a template's image
// and agent arguments, and how many to keep.
type poolKind struct {
	template  string // its ID: BaseTemplate, CodeInterpreterTemplate or a learned one's
	image     string
	agentArgs []string
	size      int
	// floor is the size an auto-sized kind never goes below; pinned is a
	// size the operator gave, which demand and the memory budget leave.
	floor  int
	pinned bool
	// cpuCount and memoryMB are a learned kind's template's resources,
	// which its containers are made with so that a claim need not change
	// them; 0 = the server's.
	cpuCount, memoryMB int
	// optional kinds' images may be absent: `warren image build` makes
	// them on demand. Their pool then stays empty, quietly.
	optional bool
}

// poolKinds returns every kind: the built-in ones, those of size 0
// included, then, when the base pool is auto-sized, those of the other
// templates created in the last poolWindow (see pool_size.go).
func (m *Manager) poolKinds() []poolKind {
	var kinds []poolKind
	for _, k := range []struct {
		template    string
		size, floor int
	}{{BaseTemplate, m.cfg.WarmPool, DefaultWarmPool}, {CodeInterpreterTemplate, m.cfg.WarmPoolCodeInterpreter, DefaultWarmPoolCodeInterpreter}} {
		tpl, build, _ := m.builtinTemplate(k.template)
		pk := poolKind{template: k.template, image: tpl.image, agentArgs: tpl.agentArgs, size: max(k.size, 0), optional: build != ""}
		if k.size == WarmPoolAuto {
			pk.floor = k.floor
			pk.size = max(k.floor, m.demand.want(k.template))
		} else {
			pk.pinned = true
		}
		kinds = append(kinds, pk)
	}
	if m.cfg.WarmPool == WarmPoolAuto {
		kinds = append(kinds, m.demand.learned(m.isBuiltin)...)
	}
	fitBudget(kinds, m.cfg.WarmPoolMemoryMB)
	return kinds
}

func (m *Manager) isBuiltin(template string) bool {
	_, _, ok := m.builtinTemplate(template)
	return ok
}

// poolKindOf returns the kind that serves sb: a pool of its template,
// image and agent arguments that is not disabled.
func (m *Manager) poolKindOf(sb sandbox.Sandbox) (poolKind, bool) {
	if len(sb.VolumeMounts) > 0 {
		return poolKind{}, false // mounts are fixed at a container's create
	}
	for _, k := range m.poolKinds() {
		if k.size > 0 && sb.Image == k.image && slices.Equal(sb.AgentArgs, k.agentArgs) && m.kindServes(k, sb.TemplateID) {
			return k, true
		}
	}
	return poolKind{}, false
}

// demandKind returns the kind whose demand a create of sb counts to: the
// built-in kind that serves it, or its template's own.
func (m *Manager) demandKind(sb sandbox.Sandbox) poolKind {
	for _, id := range []string{BaseTemplate, CodeInterpreterTemplate} {
		tpl, build, _ := m.builtinTemplate(id)
		if sb.Image == tpl.image && slices.Equal(sb.AgentArgs, tpl.agentArgs) {
			return poolKind{template: id, image: tpl.image, agentArgs: tpl.agentArgs, optional: build != ""}
		}
	}
	// optional: a template deleted since leaves an image that is gone.
	return poolKind{template: sb.TemplateID, image: sb.Image, agentArgs: slices.Clone(sb.AgentArgs), optional: true,
		cpuCount: sb.CPUCount, memoryMB: sb.MemoryMB}
}

// kindServes reports whether kind k serves creates of template: a
// built-in kind serves any template of its image (snapshots of it too, as
// before pools learned), a learned one only its own.
func (m *Manager) kindServes(k poolKind, template string) bool {
	if _, _, ok := m.builtinTemplate(k.template); ok {
		return true
	}
	return k.template == template
}

// poolTarget is what a kind's pooled containers must run now.
type poolTarget struct {
	imageID string
	runtime sandbox.OCIRuntime
}

// poolTarget returns what containers of kind k must run now. ok is false,
// with no error, when k's image is optional and absent.
func (m *Manager) poolTarget(ctx context.Context, k poolKind) (_ poolTarget, ok bool, _ error) {
	imageID, err := m.cfg.Runtime.ImageID(ctx, k.image)
	if err != nil {
		if k.optional && sandbox.KindOf(err) == sandbox.KindNotFound {
			return poolTarget{}, false, nil
		}
		return poolTarget{}, false, err
	}
	// What a create of the template would run under (its image's label).
	rt, err := m.requiredRuntime(ctx, template{id: k.template, image: k.image})
	if err != nil {
		return poolTarget{}, false, err
	}
	if rt == "" {
		rt = m.cfg.SandboxRuntime
	}
	return poolTarget{imageID: imageID, runtime: rt}, true, nil
}

// ReleasePool empties and forgets the learned pools of image, so that the
// image can be removed: a pooled container holds the image it runs. The
// built-in templates' pools are left alone; their images are not removed
// by deleting a snapshot or a template.
func (m *Manager) ReleasePool(ctx context.Context, image string) {
	m.releasing.Lock()
	defer m.releasing.Unlock()
	kinds := m.demand.forget(image, m.isBuiltin)
	if len(kinds) == 0 {
		return
	}
	for _, e := range m.pool.drop(func(e pooled) bool { return !slices.Contains(kinds, e.kind) }) {
		m.dropPooled(ctx, e, "its image is being removed")
	}
}

// errReleased is what a make of a learned pool's container returns when
// the pool's demand was forgotten meanwhile (ReleasePool, or demand that
// passed): nothing to make.
var errReleased = errors.New("warm pool released")

// pooled is a started container waiting for a sandbox.
type pooled struct {
	kind      string // its poolKind's template
	sandboxID string
	secret    string // its agent secret
	container sandbox.Container
	imageID   string
	runtime   sandbox.OCIRuntime
	limits    limits // what it was made with; zero when adopted (unknown)
	// prepared says its agent answered and took the server's CA once it
	// was made (prepareAgent), so a claim inits it at once, without the
	// CA; false when adopted.
	prepared bool
}

type limits struct{ cpu, memMB, pids int }

// warmPool is the pool's bookkeeping; the Manager's methods below and in
// pool_claim.go do the work.
type warmPool struct {
	mu    sync.Mutex      // guards ready, busy and made
	ready []pooled        // oldest first
	busy  map[string]bool // sandbox IDs being made for, or claimed from, the pool
	// made holds the kinds whose latest container was made without an
	// error: a refill makes several of them at once from its start.
	made map[string]bool
	kick chan struct{} // wakes the refill loop; buffered
	// added is closed, and replaced, whenever a container is put in
	// ready: creates waiting at the cold gate then try to claim it.
	added chan struct{}
}

func newWarmPool() *warmPool {
	return &warmPool{busy: map[string]bool{}, made: map[string]bool{}, kick: make(chan struct{}, 1), added: make(chan struct{})}
}

// readied returns a channel closed when the next container is put in the
// pool.
func (p *warmPool) readied() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.added
}

// madeOK reports whether kind's latest container was made without an
// error.
func (p *warmPool) madeOK(kind string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.made[kind]
}

func (p *warmPool) setMade(kind string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ok {
		p.made[kind] = true
	} else {
		delete(p.made, kind)
	}
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

// put adds e unless the pool already holds max of its kind; it reports
// whether it did.
func (p *warmPool) put(e pooled, max int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.countLocked(e.kind) >= max {
		return false
	}
	p.ready = append(p.ready, e)
	close(p.added)
	p.added = make(chan struct{})
	return true
}

// take removes the oldest container of kind running imageID under rt,
// and marks its sandbox ID busy; the claimer clears it with setBusy.
func (p *warmPool) take(kind, imageID string, rt sandbox.OCIRuntime) (pooled, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wake() // a miss too: the pool may need refilling with a new image
	i := slices.IndexFunc(p.ready, func(e pooled) bool { return e.kind == kind && e.imageID == imageID && e.runtime == rt })
	if i < 0 {
		return pooled{}, false
	}
	e := p.ready[i]
	p.ready = slices.Delete(p.ready, i, i+1)
	p.busy[e.sandboxID] = true
	return e, true
}

// dropNewest removes the entries gone accepts, asking of the newest
// first, and returns them.
func (p *warmPool) dropNewest(gone func(pooled) bool) []pooled {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []pooled
	for i := len(p.ready) - 1; i >= 0; i-- {
		if gone(p.ready[i]) {
			out = append(out, p.ready[i])
			p.ready = slices.Delete(p.ready, i, i+1)
		}
	}
	return out
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

// count returns how many containers of kind are ready.
func (p *warmPool) count(kind string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.countLocked(kind)
}

func (p *warmPool) countLocked(kind string) int {
	n := 0
	for _, e := range p.ready {
		if e.kind == kind {
			n++
		}
	}
	return n
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

// WarmPoolReady returns how many pooled containers, of every kind, wait
// to be claimed; ServerStats counts them by template.
func (m *Manager) WarmPoolReady() int { return m.pool.len() }

// poolEnabled reports whether any kind keeps containers.
func (m *Manager) poolEnabled() bool {
	return slices.ContainsFunc(m.poolKinds(), func(k poolKind) bool { return k.size > 0 })
}

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

// GiveWay frees room on the engine for a sandbox that finds none: it
// removes the newest idle pooled container of the kind that holds the most
// (sandbox.Crowdable), and holds refills back for poolCrowdedHold. It
// reports whether it removed one.
func (m *Manager) GiveWay(ctx context.Context) bool {
	m.crowdedUntil.Store(time.Now().Add(poolCrowdedHold).UnixNano())
	most, n := "", 0
	for _, e := range m.pool.entries() {
		if c := m.pool.count(e.kind); c > n {
			most, n = e.kind, c
		}
	}
	taken := false
	gone := m.pool.dropNewest(func(e pooled) bool {
		if taken || e.kind != most {
			return false
		}
		taken = true
		return true
	})
	for _, e := range gone {
		m.dropPooled(ctx, e, "the engine has no room for a sandbox")
	}
	return len(gone) > 0
}

// poolFillers bounds the pooled containers made at once, so that a
// refill after a burst neither takes its time one container after another
// nor holds the engine from the creates the pool could not serve: this
// machine's CPUs (a Docker engine starts containers on it), or more where
// the engine starts them elsewhere (sandbox.ParallelStarter: the nodes of
// a cluster).
func (m *Manager) poolFillers() int {
	n := max(runtime.NumCPU(), 2)
	if p, ok := m.cfg.Runtime.(sandbox.ParallelStarter); ok {
		n = max(n, p.ParallelStarts())
	}
	return n
}

// refill discards pooled containers of an outdated image, and those
// beyond their kind's size (demand has passed, or the template is no
// longer in use), and makes new ones until every kind is full, up to
// poolFillers at once, taking the kinds in turn so that none waits for
// all of another's. A kind that fails does not stop the others.
func (m *Manager) refill(ctx context.Context) error {
	type fill struct {
		kind   poolKind
		target poolTarget
	}
	var fills []fill
	var errs []error
	kept := map[string]int{} // the size of every kind kept
	kinds := m.poolKinds()
	for _, k := range kinds {
		kept[k.template] = k.size
	}
	// Of a kind no longer kept, or above its size, the newest go first:
	// ready is oldest first, so walk it from the end.
	surplus := func() func(pooled) bool {
		excess := map[string]int{}
		for _, k := range kinds {
			excess[k.template] = m.pool.count(k.template) - k.size
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
	if slices.ContainsFunc(m.pool.entries(), surplus()) {
		// A removal takes the engine's time too, which the creates and
		// claims in flight need more: the first create of a template
		// whose share of the budget comes out of another's pool would
		// otherwise wait for that pool's removal. Claims may take some
		// of the surplus meanwhile.
		m.holdForCreates(ctx, time.Now().Add(poolClaimHold))
	}
	for _, e := range m.pool.dropNewest(surplus()) {
		m.dropPooled(ctx, e, "more than the pool keeps now")
	}
	// takeUp drops k's containers of an outdated image and adds k to
	// fills; it returns the error that keeps it out. It is called once
	// for each kind in a pass.
	takenUp := map[string]bool{}
	takeUp := func(k poolKind) error {
		takenUp[k.template] = true
		t, ok, err := m.poolTarget(ctx, k)
		if err != nil {
			return fmt.Errorf("%s: %w", k.template, err)
		}
		outdated := func(e pooled) bool {
			return e.kind == k.template && (!ok || e.imageID != t.imageID || e.runtime != t.runtime)
		}
		for _, e := range m.pool.drop(func(e pooled) bool { return !outdated(e) }) {
			m.dropPooled(ctx, e, "image rebuilt or removed")
		}
		if !ok {
			m.log.Debug("warm pool: image not built; keeping none until it is", logkey.Template, k.template, logkey.Image, k.image)
			return nil
		}
		fills = append(fills, fill{kind: k, target: t})
		return nil
	}
	for _, k := range kinds {
		if k.size == 0 {
			continue
		}
		if err := takeUp(k); err != nil {
			errs = append(errs, err)
		}
	}
	if until := m.crowdedUntil.Load(); time.Now().UnixNano() < until {
		m.log.Debug("warm pool: the engine was out of room for a sandbox; no refill until the hold ends",
			"until", time.Unix(0, until))
		return errors.Join(errs...)
	}
	var (
		mu       sync.Mutex // guards failed, making, made, inFlight and errs below
		failed   = map[string]bool{}
		making   = map[string]int{}
		made     = map[string]bool{}
		inFlight int
		wg       sync.WaitGroup
		slots    = make(chan struct{}, m.poolFillers())
		// done tells the loop that a container is made (or failed).
		done = make(chan struct{}, 1)
		// holdUntil ends the pass's hold for claims and creates (holdForCreates),
		// poolClaimHold after its first.
		holdUntil time.Time
	)
	for more := true; more && ctx.Err() == nil; {
		more = false
		for _, f := range fills {
			k := f.kind
			mu.Lock()
			// A kind makes one container before it makes several, so that
			// a failing engine sees one attempt per refill; unless its
			// latest one was made, so that a refill after claims replaces
			// them all at once.
			full := failed[k.template] || m.pool.count(k.template)+making[k.template] >= k.size ||
				!made[k.template] && making[k.template] > 0 && !m.pool.madeOK(k.template)
			if !full {
				making[k.template]++
				inFlight++
			}
			mu.Unlock()
			if full {
				continue
			}
			more = true
			if holdUntil.IsZero() {
				holdUntil = time.Now().Add(poolClaimHold)
			}
			m.holdForCreates(ctx, holdUntil)
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				err := m.makePooled(ctx, k, f.target)
				mu.Lock()
				defer mu.Unlock()
				making[k.template]--
				inFlight--
				if errors.Is(err, errReleased) {
					failed[k.template] = true
				} else if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", k.template, err))
					failed[k.template] = true
				} else {
					made[k.template] = true
				}
				m.pool.setMade(k.template, err == nil)
				select {
				case done <- struct{}{}:
				default:
				}
			})
		}
		if more {
			continue
		}
		mu.Lock()
		busy := inFlight > 0
		mu.Unlock()
		if busy {
			// Look again when a container is made (a kind's first lets it
			// make several) or claims take some (the pool must not wait
			// for every container in flight before it replaces them: on
			// an engine whose starts take seconds, back-to-back creates
			// would drain it).
			select {
			case <-done:
			case <-m.pool.kick:
			case <-ctx.Done():
			}
			// Demand may have grown the kinds meanwhile, or made new ones (a
			// pass lasts as long as creates keep claiming).
			sizes := map[string]int{}
			for _, k := range m.poolKinds() {
				sizes[k.template] = k.size
				if k.size > 0 && !takenUp[k.template] {
					if err := takeUp(k); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			}
			for i := range fills {
				fills[i].kind.size = sizes[fills[i].kind.template]
			}
			more = true
			continue
		}
		// Nothing in flight: claims may have taken what was made.
		for _, f := range fills {
			if !failed[f.kind.template] && m.pool.count(f.kind.template) < f.kind.size {
				more = true
			}
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// makePooled creates and starts one pooled container of kind k.
func (m *Manager) makePooled(ctx context.Context, k poolKind, t poolTarget) error {
	sb := sandbox.Sandbox{
		ID:          sandbox.NewID(),
		Image:       k.image,
		AgentSecret: sandbox.NewToken(),
		CPUCount:    cmp.Or(k.cpuCount, m.cfg.CPUCount),
		MemoryMB:    cmp.Or(k.memoryMB, m.cfg.MemoryMB),
		DiskSizeMB:  m.cfg.DiskSizeMB,
		AgentArgs:   slices.Clone(k.agentArgs),
		Runtime:     t.runtime,
	}
	if !m.isBuiltin(k.template) {
		m.releasing.RLock()
		defer m.releasing.RUnlock()
		if !m.demand.knows(k.template) {
			return errReleased
		}
	}
	m.pool.setBusy(sb.ID, true)
	defer m.pool.setBusy(sb.ID, false)
	spec := m.containerSpec(sb)
	spec.Labels = map[string]string{sandbox.LabelPool: "true"}
	t0 := time.Now()
	c, err := m.cfg.Runtime.Create(ctx, spec)
	if err != nil {
		return err
	}
	imageID := t.imageID
	if c.ImageID != "" {
		imageID = c.ImageID // the image may have been rebuilt meanwhile
	}
	if err := m.prepareAgent(ctx, c.AgentAddr, sb.AgentSecret); err != nil {
		m.discardPooled(ctx, c.ID, sb.ID, "its agent did not answer or refused the CA")
		return err
	}
	m.demand.refilled(k.template, time.Since(t0))
	e := pooled{
		kind: k.template, sandboxID: sb.ID, secret: sb.AgentSecret, container: c,
		imageID: imageID, runtime: spec.Runtime,
		limits:   limits{spec.CPUCount, spec.MemoryMB, spec.PidsLimit},
		prepared: true,
	}
	if err := m.preparePooled(ctx, e); err != nil {
		m.discardPooled(ctx, c.ID, sb.ID, "its network rules failed")
		return err
	}
	if !m.pool.put(e, k.size) {
		m.dropPooled(ctx, e, "pool full")
		return nil
	}
	m.log.Debug("warm pool container ready", logkey.Template, k.template, logkey.Sandbox, sb.ID, logkey.Container, c.ID)
	return nil
}
