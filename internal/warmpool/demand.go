package warmpool

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// How the warm pool sizes itself when a size is Auto: each template's
// pool is as large as the demand it saw in the last Window, the larger of
// its biggest burst (creates in flight at once) and its busiest refill
// span (creates begun within the time a refill of its pool takes, which a
// pool must hold since the containers claimed in that span are not
// replaced before it ends: at least a second, about that on Docker, two or
// more for a pod on a busy cluster), and never smaller than its floor (a
// Builtin's Floor, 0 for the others), plus one while its refill takes
// longer than a second (spareLocked). So a burst larger than the pool
// grows it for the next one, and when demand stops the pool drains back
// to its floor after Window. What pools beyond their floors hold together is
// bounded by Settings.BudgetMB, at the estimate of ContainerMB (or the
// Builtin's MemoryMB) per container.
//
// The demand survives a restart of the server: every SaveInterval when it
// changed, and when the pool closes, its peaks (the sizes it asks for,
// and when) are saved in the store, at most savedPeaks for each of the
// savedTemplates templates that want the most; Start loads them again,
// without the peaks older than Window or the templates that no longer
// resolve (deleted, or their image gone).

const (
	// Window is how long a burst keeps its template's pool large.
	Window = 5 * time.Minute
	// rateSpan is the shortest span over which creates count as one
	// burst even when they do not overlap: back-to-back creates, each
	// waiting for the one before, need a pool too. The span is the time a
	// refill of the template's pool takes, as measured (demand.refilled),
	// from rateSpan to rateSpanMax.
	rateSpan    = time.Second
	rateSpanMax = 10 * time.Second
	// demandCap bounds the creates remembered per template.
	demandCap = 4096
	// SaveInterval is how often changed demand is saved.
	SaveInterval = 30 * time.Second
	// savedTemplates and savedPeaks bound what is saved: a
	// client that makes many templates does not grow the store.
	savedTemplates = 64
	savedPeaks     = 16
)

// Begin counts a create of sb in the demand of the kind that serves it,
// and in its team's creates (which share the gate and the pool with other
// teams'), and returns the function that counts its end. A create with
// volume mounts counts to no kind: no pooled container has mounts.
func (p *Pool) Begin(sb sandbox.Sandbox) (end func()) {
	endTeam := p.cold.teams.begin(sb.TeamID)
	if len(sb.VolumeMounts) > 0 {
		return endTeam
	}
	endDemand := p.demand.begin(p.demandKind(sb), sb.TeamID)
	return func() {
		endDemand()
		endTeam()
	}
}

// demand is what the creates of each template asked of the pool.
type demand struct {
	mu    sync.Mutex
	kinds map[string]*kindDemand // by template ID
	// refill is, by template ID, the smoothed time the engine took to make
	// a pooled container of it (kept while kinds come and go, dropped by
	// forget).
	refill map[string]time.Duration
	// changes counts the changes to kinds; saved is its value at the
	// latest save.
	changes, saved uint64
}

type kindDemand struct {
	kind     kind   // image and agent arguments of its latest create
	teamID   string // the team of its latest create
	inFlight int
	starts   []start // oldest first, within Window
	// peaks are the demand loaded from the store, oldest first, within
	// Window: each start's inFlight is the size it asks for.
	peaks []start
}

// start is one create: when it began, and how many of its template's
// creates were in flight then, itself included.
type start struct {
	at       time.Time
	inFlight int
}

func newDemand() *demand {
	return &demand{kinds: map[string]*kindDemand{}, refill: map[string]time.Duration{}}
}

// refilled records that a pooled container of template took took to make.
func (d *demand) refilled(template string, took time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if prev, ok := d.refill[template]; ok {
		took = prev + (took-prev)/4 // smoothed: one slow start does not double the pool
	}
	d.refill[template] = took
}

// refillSpan is the time a refill of template's pool takes (spanLocked);
// rateSpan with no demand kept (tests).
func (p *Pool) refillSpan(template string) time.Duration {
	if p.demand == nil {
		return rateSpan
	}
	p.demand.mu.Lock()
	defer p.demand.mu.Unlock()
	return p.demand.spanLocked(template)
}

// spanLocked is the span within which template's creates count as one
// burst: the time a refill of its pool takes, within bounds.
func (d *demand) spanLocked(template string) time.Duration {
	return min(max(d.refill[template], rateSpan), rateSpanMax)
}

// begin records the start of a create of kind k by team; the returned
// function records its end.
func (d *demand) begin(k kind, team string) (end func()) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	kd := d.kinds[k.template]
	if kd == nil {
		kd = &kindDemand{}
		d.kinds[k.template] = kd
	}
	d.changes++
	kd.kind, kd.teamID = k, team
	kd.inFlight++
	kd.prune(now)
	if len(kd.starts) == demandCap {
		kd.starts = slices.Delete(kd.starts, 0, 1)
	}
	kd.starts = append(kd.starts, start{at: now, inFlight: kd.inFlight})
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		kd.inFlight--
	}
}

func (kd *kindDemand) prune(now time.Time) {
	kd.starts = pruned(kd.starts, now)
	kd.peaks = pruned(kd.peaks, now)
}

// pruned drops the starts, oldest first, older than Window.
func pruned(starts []start, now time.Time) []start {
	i := 0
	for i < len(starts) && now.Sub(starts[i].at) > Window {
		i++
	}
	return slices.Delete(starts, 0, i)
}

// want returns how many containers template's pool should hold for the
// demand of the last Window: its largest burst or busiest second.
func (d *demand) want(template string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	kd := d.kinds[template]
	if kd == nil {
		return 0
	}
	kd.prune(time.Now())
	return d.sizeLocked(template, kd)
}

// sizeLocked is what template's pool should hold for its demand kd: its
// largest burst, and a spare while a refill of its pool takes longer than
// rateSpan. Without it, one client's loop of creates (one at a time, a
// pause between them) starves a pool whose refill is slower than the
// loop: the pool holds the creates of a span, one; the next create comes
// while its replacement starts and misses; a miss takes a container's
// whole start, which spaces the creates more than a span apart, so the
// span never sees two and the pool stays at one (with Kubernetes pods,
// which start in 2-3 s, every other create of a loop a second apart would
// miss). The spare is claimed while the replacement starts, the creates
// then come at the client's pace, and the span counts them.
func (d *demand) sizeLocked(template string, kd *kindDemand) int {
	n := kd.wantLocked(d.spanLocked(template))
	if n > 0 && d.refill[template] > rateSpan {
		n++
	}
	return n
}

// wantLocked is the kind's largest burst, counting the creates begun
// within span as one.
func (kd *kindDemand) wantLocked(span time.Duration) int {
	n, lo := 0, 0
	for _, p := range kd.peaks {
		n = max(n, p.inFlight)
	}
	for hi, s := range kd.starts {
		for s.at.Sub(kd.starts[lo].at) > span {
			lo++
		}
		n = max(n, s.inFlight, hi-lo+1)
	}
	return n
}

// peaksLocked returns what each start and loaded peak asks for (as
// inFlight) in time order, a start's the larger of its burst and the
// count of its span (as wantLocked), keeping only those that ask for more
// than every later one: the steps down of what the pool will want as they
// age out, whose largest is what it wants now.
func (kd *kindDemand) peaksLocked(span time.Duration) []start {
	all := slices.Clone(kd.peaks)
	lo := 0
	for hi, s := range kd.starts {
		for s.at.Sub(kd.starts[lo].at) > span {
			lo++
		}
		all = append(all, start{at: s.at, inFlight: max(s.inFlight, hi-lo+1)})
	}
	slices.SortStableFunc(all, func(a, b start) int { return a.at.Compare(b.at) })
	var out []start
	for i := len(all) - 1; i >= 0; i-- {
		if len(out) == 0 || all[i].inFlight > out[len(out)-1].inFlight {
			out = append(out, all[i])
		}
	}
	slices.Reverse(out)
	return out
}

// toSave returns the demand to save, at most savedTemplates templates
// (those that want the most) of at most savedPeaks peaks (the
// largest), and whether it changed since the latest markSaved.
func (d *demand) toSave() (_ []sandbox.PoolDemand, changes uint64, changed bool) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	type kindPeaks struct {
		sandbox.PoolDemand
		want int
	}
	var all []kindPeaks
	for id, kd := range d.kinds {
		kd.prune(now)
		peaks := kd.peaksLocked(d.spanLocked(id))
		if len(peaks) == 0 {
			continue
		}
		// The first are the largest: peaks step down.
		peaks = peaks[:min(len(peaks), savedPeaks)]
		pd := sandbox.PoolDemand{TemplateID: id, TeamID: kd.teamID}
		for _, p := range peaks {
			pd.Peaks = append(pd.Peaks, sandbox.DemandPeak{At: p.at, Size: p.inFlight})
		}
		all = append(all, kindPeaks{pd, peaks[0].inFlight})
	}
	slices.SortFunc(all, func(a, b kindPeaks) int {
		if a.want != b.want {
			return b.want - a.want
		}
		return cmp.Compare(a.TemplateID, b.TemplateID)
	})
	out := make([]sandbox.PoolDemand, 0, min(len(all), savedTemplates))
	for _, k := range all[:min(len(all), savedTemplates)] {
		out = append(out, k.PoolDemand)
	}
	return out, d.changes, d.changes != d.saved
}

// touch records a change that the next save must write.
func (d *demand) touch() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.changes++
}

// markSaved records that the demand as of changes is saved.
func (d *demand) markSaved(changes uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.saved = changes
}

// load adds the saved demand of kind k: its peaks within Window.
func (d *demand) load(k kind, team string, peaks []sandbox.DemandPeak) {
	now := time.Now()
	var kept []start
	for _, p := range peaks {
		if now.Sub(p.At) <= Window && p.Size > 0 {
			kept = append(kept, start{at: p.At, inFlight: p.Size})
		}
	}
	slices.SortFunc(kept, func(a, b start) int { return a.at.Compare(b.at) })
	if len(kept) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	kd := d.kinds[k.template]
	if kd == nil {
		kd = &kindDemand{kind: k, teamID: team}
		d.kinds[k.template] = kd
	}
	kd.peaks = kept
}

// learned returns the kinds that templates other than the built-in ones
// asked for in the last Window, each with the size its demand wants,
// largest first; it forgets templates whose demand has passed.
func (d *demand) learned(builtin func(template string) bool) []kind {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []kind
	for id, kd := range d.kinds {
		kd.prune(now)
		if len(kd.starts) == 0 && len(kd.peaks) == 0 && kd.inFlight == 0 {
			delete(d.kinds, id)
			if !builtin(id) {
				delete(d.refill, id) // a learned kind's pool goes with its demand
			}
			continue
		}
		if builtin(id) {
			continue
		}
		k := kd.kind
		k.size = d.sizeLocked(id, kd)
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b kind) int {
		if a.size != b.size {
			return b.size - a.size
		}
		return cmp.Compare(a.template, b.template)
	})
	return out
}

// knows reports whether template has demand the pool keeps.
func (d *demand) knows(template string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.kinds[template]
	return ok
}

// forget drops the demand of every template other than the built-in ones
// whose latest create ran image (in any form of its reference), and
// returns their IDs.
func (d *demand) forget(image string, builtin func(template string) bool) []string {
	same := func(ref string) bool { return ref == image }
	if named, err := sandbox.ParseImageRef(image); err == nil {
		same = func(ref string) bool {
			n, err := sandbox.ParseImageRef(ref)
			return ref == image || err == nil && n.String() == named.String()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for id, kd := range d.kinds {
		if same(kd.kind.image) && !builtin(id) {
			delete(d.kinds, id)
			delete(d.refill, id)
			d.changes++
			out = append(out, id)
		}
	}
	return out
}

// fitBudget lowers the sizes of kinds (in place) so that what they hold
// beyond their floors fits budgetMB. Floors are kept and pinned kinds are
// left alone (their size is the operator's). The rest is shared out one
// container a kind at a time, round after round, until each kind has what
// it wants or the budget cannot pay for another: a template that wants a
// few keeps them beside one whose burst would fill the budget alone (the
// built-in templates, listed first, are served first in a round).
func fitBudget(kinds []kind, budgetMB int) {
	left := budgetMB
	want := make([]int, len(kinds))
	for i, k := range kinds {
		if k.pinned || k.size <= k.floor {
			continue
		}
		want[i] = k.size - k.floor
		kinds[i].size = k.floor
	}
	for gave := true; gave; {
		gave = false
		for i, k := range kinds {
			if cost := k.costMB(); want[i] > 0 && cost <= left {
				kinds[i].size++
				want[i]--
				left -= cost
				gave = true
			}
		}
	}
}

// loadDemand takes up the demand the store kept from before a restart,
// for the templates that still resolve as they did.
func (p *Pool) loadDemand(ctx context.Context) error {
	saved, err := p.deps.Store.PoolDemand(ctx)
	if err != nil {
		return err
	}
	for _, d := range saved {
		sb, err := p.deps.Templates.Resolve(ctx, d.TeamID, d.TemplateID)
		if err != nil {
			p.log.Info("warm pool: the saved demand of a template that no longer resolves is dropped",
				logkey.Template, d.TemplateID, "err", err)
			p.demand.touch() // so that the next save leaves it out
			continue
		}
		k := p.demandKind(sb)
		if k.template != d.TemplateID {
			p.demand.touch() // its ID now names another template's
			continue
		}
		p.demand.load(k, d.TeamID, d.Peaks)
	}
	return nil
}

// saveDemand saves the demand when it changed since its latest save.
func (p *Pool) saveDemand(ctx context.Context) {
	ds, changes, changed := p.demand.toSave()
	if !changed {
		return
	}
	if err := p.deps.Store.SavePoolDemand(context.WithoutCancel(ctx), ds); err != nil {
		p.log.Warn("cannot save the warm pools' demand", "err", err)
		return
	}
	p.demand.markSaved(changes)
}
