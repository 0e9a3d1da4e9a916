package lifecycle

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// How the warm pool sizes itself when a size is WarmPoolAuto: each
// template's pool is as large as the demand it saw in the last poolWindow,
// the larger of its biggest burst (creates in flight at once) and its
// busiest second (creates begun within one second, which a pool must hold
// since a refill takes about that long), and never smaller than its floor
// (DefaultWarmPool for base, DefaultWarmPoolCodeInterpreter for the code
// interpreter, 0 for the others). So a burst larger than the pool grows
// it for the next one, and when demand stops the pool drains back to its
// floor after poolWindow. What pools beyond their floors hold together is
// bounded by Settings.WarmPoolMemoryMB, at the estimate of poolMemoryMB
// per container.

// WarmPoolAuto, as Settings.WarmPool or WarmPoolCodeInterpreter, sizes
// the pool from demand.
const WarmPoolAuto = -1

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

const (
	// poolWindow is how long a burst keeps its template's pool large.
	poolWindow = 5 * time.Minute
	// poolRateSpan is the span over which creates count as one burst
	// even when they do not overlap: back-to-back creates, each waiting
	// for the one before, need a pool too.
	poolRateSpan = time.Second
	// poolDemandCap bounds the creates remembered per template.
	poolDemandCap = 4096
)

// poolMemoryMB is the memory a pooled container is taken to hold when the
// pools are fitted into Settings.WarmPoolMemoryMB: an idle agent and its
// container (about 10 MiB) rounded up; a code interpreter's idle python
// and javascript kernels take about 75 MiB.
func poolMemoryMB(template string) int {
	if template == CodeInterpreterTemplate {
		return 80
	}
	return 16
}

// demand is what the creates of each template asked of the pool.
type demand struct {
	mu    sync.Mutex
	kinds map[string]*kindDemand // by template ID
}

type kindDemand struct {
	kind     poolKind // image and agent arguments of its latest create
	inFlight int
	starts   []start // oldest first, within poolWindow
}

// start is one create: when it began, and how many of its template's
// creates were in flight then, itself included.
type start struct {
	at       time.Time
	inFlight int
}

func newDemand() *demand { return &demand{kinds: map[string]*kindDemand{}} }

// begin records the start of a create of kind k; the returned function
// records its end.
func (d *demand) begin(k poolKind) (end func()) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	kd := d.kinds[k.template]
	if kd == nil {
		kd = &kindDemand{}
		d.kinds[k.template] = kd
	}
	kd.kind = k
	kd.inFlight++
	kd.prune(now)
	if len(kd.starts) == poolDemandCap {
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
	i := 0
	for i < len(kd.starts) && now.Sub(kd.starts[i].at) > poolWindow {
		i++
	}
	kd.starts = slices.Delete(kd.starts, 0, i)
}

// want returns how many containers template's pool should hold for the
// demand of the last poolWindow: its largest burst or busiest second.
func (d *demand) want(template string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	kd := d.kinds[template]
	if kd == nil {
		return 0
	}
	kd.prune(time.Now())
	return kd.wantLocked()
}

func (kd *kindDemand) wantLocked() int {
	n, lo := 0, 0
	for hi, s := range kd.starts {
		for s.at.Sub(kd.starts[lo].at) > poolRateSpan {
			lo++
		}
		n = max(n, s.inFlight, hi-lo+1)
	}
	return n
}

// learned returns the kinds that templates other than the built-in ones
// asked for in the last poolWindow, each with the size its demand wants,
// largest first; it forgets templates whose demand has passed.
func (d *demand) learned(builtin func(template string) bool) []poolKind {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []poolKind
	for id, kd := range d.kinds {
		kd.prune(now)
		if len(kd.starts) == 0 && kd.inFlight == 0 {
			delete(d.kinds, id)
			continue
		}
		if builtin(id) {
			continue
		}
		k := kd.kind
		k.size = kd.wantLocked()
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b poolKind) int {
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
			out = append(out, id)
		}
	}
	return out
}

// fitBudget lowers the sizes of kinds (in place) so that what they hold
// beyond their floors fits budgetMB: floors are kept, pinned kinds are
// left alone (their size is the operator's), and the rest is given out in
// the order of kinds, so the built-in templates, listed first, come first.
func fitBudget(kinds []poolKind, budgetMB int) {
	left := budgetMB
	for i, k := range kinds {
		if k.pinned || k.size <= k.floor {
			continue
		}
		cost := poolMemoryMB(k.template)
		extra := min(k.size-k.floor, max(left, 0)/cost)
		kinds[i].size = k.floor + extra
		left -= extra * cost
	}
}
