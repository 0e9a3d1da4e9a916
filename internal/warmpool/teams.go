package warmpool

import (
	"sync"
	"time"
)

// Which teams create sandboxes now, so that the engine's start slots and
// the pool's containers are shared between them while several do: a team
// that bursts gets its share of the gate's slots (coldGate), and leaves
// pooled containers for each team that creates fewer at once, as many as
// that team creates while the pool refills (Claim). One team alone is
// never held back.

// ActiveWindow is how long a team counts as creating after its latest
// create began. A team that creates one sandbox a second from the pool is
// in flight for milliseconds of each second: between its creates it is
// still a team the slots and the pool are shared with.
const ActiveWindow = 5 * time.Second

// teams counts each team's creates in flight and when its latest began.
type teams struct {
	mu sync.Mutex
	by map[string]*teamCreates // guarded by mu
}

type teamCreates struct {
	inFlight int
	latest   time.Time   // when its latest create began
	begun    []time.Time // when its creates began, within the last rateSpanMax
}

// begin counts a create of team in, and returns the function that counts
// it out.
func (t *teams) begin(team string) (end func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if t.by == nil {
		t.by = map[string]*teamCreates{}
	}
	for name, c := range t.by {
		if c.inFlight == 0 && now.Sub(c.latest) > ActiveWindow {
			delete(t.by, name)
		}
	}
	c := t.by[team]
	if c == nil {
		c = &teamCreates{}
		t.by[team] = c
	}
	c.inFlight++
	c.latest = now
	i := 0
	for i < len(c.begun) && now.Sub(c.begun[i]) > rateSpanMax {
		i++
	}
	c.begun = append(c.begun[i:], now)
	return sync.OnceFunc(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		c.inFlight--
	})
}

// active reports whether c counts as creating at now.
func (c *teamCreates) active(now time.Time) bool {
	return c.inFlight > 0 || now.Sub(c.latest) <= ActiveWindow
}

// active returns the teams creating now.
func (t *teams) active() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	out := map[string]bool{}
	for name, c := range t.by {
		if c.active(now) {
			out[name] = true
		}
	}
	return out
}

// kept returns how many pooled containers a claim of team leaves for the
// other teams creating now with fewer creates in flight: for each, as
// many as it began within span (the time a refill of the pool takes), at
// least one. A team that creates one a second needs that many ready while
// the refill replaces the one it claims: one alone is gone at its next
// create, which then waits for a container's start.
func (t *teams) kept(team string, span time.Duration) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	mine := 0
	if c := t.by[team]; c != nil {
		mine = c.inFlight
	}
	return t.ratesBesides(team, span, func(c *teamCreates) bool { return c.inFlight < mine })
}

// besides returns how many pooled containers are kept for the teams
// creating now other than heavy, whose claims the refill makes them for
// in slots of its own (pass.beyond): for each, as many as it began within
// span, at least one, as a claim of heavy's leaves them (kept).
func (t *teams) besides(heavy string, span time.Duration) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ratesBesides(heavy, span, func(*teamCreates) bool { return true })
}

// ratesBesides sums the rates within span of the teams creating now
// other than except that counts. The caller holds t.mu.
func (t *teams) ratesBesides(except string, span time.Duration, counts func(*teamCreates) bool) int {
	now := time.Now()
	n := 0
	for name, c := range t.by {
		if name != except && c.active(now) && counts(c) {
			n += c.rate(now, span)
		}
	}
	return n
}

// rate returns how many creates c began within span before now, at
// least one.
func (c *teamCreates) rate(now time.Time, span time.Duration) int {
	recent := 0
	for _, at := range c.begun {
		if now.Sub(at) <= span {
			recent++
		}
	}
	return max(recent, 1)
}
