package warmpool

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// What a burst of creates meets on its way: creates the pool cannot serve
// wait at a gate (coldGate) that lets a few make their containers at
// once, so that a burst larger than the engine can start is served in
// turn, and one larger than the gate's queue is refused at once with a
// message, never left to hang. The claims in flight and the creates
// through the gate are counted (gauge), so that the refill that replaces
// them on this machine can wait for them to pass (holdForCreates) rather
// than take the CPU and the engine they need.

// coldWait bounds how long a create waits at the gate before it is
// refused: half the e2b SDKs' default request timeout (60 s), so that a
// client told to retry hears it from the server rather than from its own
// timeout, with time left for the create itself. coldQueue bounds how
// many may wait.
const (
	coldWait  = 30 * time.Second
	coldQueue = 1024
)

// BusyRetry is the Retry-After of a create refused because the server
// is full.
const BusyRetry = 5 * time.Second

// coldGate admits creates that make their own container. Its waiting
// creates are queued by team, and a slot that frees goes to the teams in
// turn (round-robin), each team's creates in their order. While several
// teams create, each holds at most its share of the slots (share): a slot
// a team beyond its share would take is kept for another team's next
// create, and meanwhile lent to the pool's refill of the containers kept
// for the other teams (takeSpare; Claim keeps them); the refill's
// containers for the bursting team's claims take slots of its share
// (takeShare), as its removals do. One team's burst of hundreds delays
// another team's create by a slot's turn at most, not by the whole
// burst; a team alone has every slot.
type coldGate struct {
	size    int    // creates let through at once
	running gauge  // the creates let through
	teams   *teams // the teams creating now, which share the slots
	mu      sync.Mutex
	used    int                      // slots taken; guarded by mu
	held    map[string]int           // slots taken by team; guarded by mu
	queues  map[string][]*coldWaiter // waiting creates by team, oldest first; guarded by mu
	turns   []string                 // teams with creates waiting, the next slot's first; guarded by mu
	waiting int                      // guarded by mu
	// spared is signalled when slots stay free while creates wait (their
	// teams hold their shares), for the refill to take (takeSpare).
	spared chan struct{}
}

// coldWaiter is a create waiting at the gate; admitted is closed when a
// slot is handed to it.
type coldWaiter struct {
	team     string
	admitted chan struct{}
	claiming bool // trying to claim a readied container; guarded by coldGate.mu
	removal  bool // a removal's (AdmitRemoval), which claims none
}

// newColdGate admits 4 creates per CPU at once: the engine serialises
// much of a container's create and start, so more in flight only share
// the same throughput out, later for each.
func newColdGate() coldGate {
	return coldGate{size: max(4*runtime.NumCPU(), 4), teams: &teams{}, held: map[string]int{},
		queues: map[string][]*coldWaiter{}, spared: make(chan struct{}, 1)}
}

// ColdSlots returns how many creates AdmitCold lets through at once.
func (p *Pool) ColdSlots() int { return p.cold.size }

// AdmitCold waits for the gate to let a create of team through and
// returns the function that lets the next one. While it waits, every
// container the warm pool readies (a refill runs beside the burst, and
// grows the pool for it) is offered to claim, which reports whether it
// took it: then AdmitCold returns claimed true and no release, and the
// create is the pool's. Only the first waiting create of each team that
// is not trying already tries, so that readied containers are shared
// between the teams waiting, not won by the team with the most creates in
// the race. A create is refused when coldQueue others wait
// already, or when it waited coldWait or until ctx ended.
func (p *Pool) AdmitCold(ctx context.Context, team string, claim func() bool) (release func(), claimed bool, err error) {
	g := &p.cold
	w, err := g.enter(team)
	if err != nil {
		return nil, false, err
	}
	if w == nil {
		return g.admitted(team), false, nil
	}
	t := time.NewTimer(coldWait)
	defer t.Stop()
	for {
		added := p.stock.readied()
		select {
		case <-w.admitted:
			return g.admitted(team), false, nil
		case <-added:
			if !g.startClaim(w) {
				continue
			}
			ok := claim()
			g.endClaim(w)
			if ok {
				g.leave(w)
				return nil, true, nil
			}
		case <-t.C:
			g.leave(w)
			return nil, false, sandbox.Busy(fmt.Sprintf(
				"the sandbox could not start within %s: the server is busy creating others; retry later", coldWait), BusyRetry)
		case <-ctx.Done():
			g.leave(w)
			return nil, false, sandbox.Wrap(sandbox.KindUnavailable, ctx.Err(), "the create was cancelled while waiting to start")
		}
	}
}

// enter takes a slot at once (nil waiter) when one is free, none waits
// and team is within its share, or queues a waiter for team, which a slot
// the shares left free may take at once.
func (g *coldGate) enter(team string) (*coldWaiter, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.used < g.size && g.waiting == 0 && g.held[team] < g.share(team) {
		g.used++
		g.held[team]++
		return nil, nil
	}
	if g.waiting >= coldQueue {
		return nil, sandbox.Busy(fmt.Sprintf(
			"the server is creating as many sandboxes as it can (%d waiting to start): retry in a few seconds", coldQueue), BusyRetry)
	}
	w := &coldWaiter{team: team, admitted: make(chan struct{})}
	if len(g.queues[team]) == 0 {
		g.turns = append(g.turns, team)
	}
	g.queues[team] = append(g.queues[team], w)
	g.waiting++
	g.dispatch()
	return w, nil
}

// share returns how many slots each team may hold now: the gate's size
// over the teams holding or waiting for a slot (and also), rounded up.
// A team alone at the gate while others create from the pool
// (teams.active) holds half: their next creates need a slot at once, and
// their refills the engine's time (takeSpare), yet a dozen teams that
// create now and then must not leave a burst one slot each. The caller
// holds g.mu.
func (g *coldGate) share(also string) int {
	contending := map[string]bool{also: true}
	for team := range g.held {
		contending[team] = true
	}
	for team := range g.queues {
		contending[team] = true
	}
	n := len(contending)
	if n == 1 {
		for team := range g.teams.active() {
			if !contending[team] {
				n = 2
				break
			}
		}
	}
	return (g.size + n - 1) / n
}

// dispatch hands the free slots to the first create of each team in turn
// that holds less than its share; a team served goes to the end of the
// turns if it has more waiting. The caller holds g.mu.
func (g *coldGate) dispatch() {
	for g.used < g.size && len(g.turns) > 0 {
		share := g.share(g.turns[0])
		i := slices.IndexFunc(g.turns, func(team string) bool { return g.held[team] < share })
		if i < 0 {
			break
		}
		team := g.turns[i]
		g.turns = slices.Delete(g.turns, i, i+1)
		q := g.queues[team]
		w := q[0]
		if len(q) > 1 {
			g.queues[team] = q[1:]
			g.turns = append(g.turns, team)
		} else {
			delete(g.queues, team)
		}
		g.waiting--
		g.used++
		g.held[team]++
		close(w.admitted)
	}
	if g.used < g.size && g.waiting > 0 {
		select {
		case g.spared <- struct{}{}:
		default:
		}
	}
}

// takeSpare takes for the refill a slot that the shares leave free while
// creates wait, and returns the function that gives it back. The engine's
// time a burst may not take thus readies pooled containers, which go to
// the other teams first (Claim) and to the burst beyond them: the slots
// are shared between the teams without any standing idle.
func (g *coldGate) takeSpare() (release func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dispatch() // shares grow as teams go idle (ActiveWindow)
	if g.used >= g.size || g.waiting == 0 {
		return nil, false
	}
	g.used++
	return sync.OnceFunc(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.used--
		g.dispatch()
	}), true
}

// startClaim reports whether w may try to claim a readied container:
// when it is the oldest create of its team waiting that is not trying
// already (a claim that succeeds takes as long as the create). It then
// counts w as trying until endClaim.
func (g *coldGate) startClaim(w *coldWaiter) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, o := range g.queues[w.team] {
		if o.claiming || o.removal {
			continue
		}
		if o != w {
			return false
		}
		w.claiming = true
		return true
	}
	return false
}

func (g *coldGate) endClaim(w *coldWaiter) {
	g.mu.Lock()
	w.claiming = false
	g.mu.Unlock()
}

// leave takes w out of the queue; a slot handed to it meanwhile goes on
// to the next.
func (g *coldGate) leave(w *coldWaiter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.admitted:
		g.free(w.team)
		return
	default:
	}
	q := g.queues[w.team]
	for i, o := range q {
		if o == w {
			q = append(q[:i], q[i+1:]...)
			break
		}
	}
	g.waiting--
	if len(q) > 0 {
		g.queues[w.team] = q
		return
	}
	delete(g.queues, w.team)
	for i, team := range g.turns {
		if team == w.team {
			g.turns = append(g.turns[:i], g.turns[i+1:]...)
			break
		}
	}
	// One team fewer waiting may raise the others' shares.
	g.dispatch()
}

// free gives back a slot team held, to the creates waiting. The caller
// holds g.mu.
func (g *coldGate) free(team string) {
	g.used--
	if g.held[team]--; g.held[team] <= 0 {
		delete(g.held, team)
	}
	g.dispatch()
}

// admitted counts in a create of team given a slot, and returns the
// function that counts it out and gives the slot to the next.
func (g *coldGate) admitted(team string) (release func()) {
	end := g.running.begin()
	return func() {
		end()
		g.mu.Lock()
		g.free(team)
		g.mu.Unlock()
	}
}

// queued returns how many creates wait at the gate.
func (g *coldGate) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// gauge counts operations in flight.
type gauge struct {
	mu    sync.Mutex
	n     int
	quiet chan struct{} // closed when n falls to 0
}

// begin counts an operation in and returns the function that counts it
// out.
func (g *gauge) begin() (end func()) {
	g.mu.Lock()
	if g.n == 0 {
		g.quiet = make(chan struct{})
	}
	g.n++
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.n--; g.n == 0 {
			close(g.quiet)
		}
	}
}

// passed returns a channel closed once none is in flight; nil when none
// is now.
func (g *gauge) passed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n == 0 {
		return nil
	}
	return g.quiet
}

// ClaimHold bounds how long one refill pass holds back for claims: a
// steady stream of them would otherwise hold it off until the pool ran
// dry. ClaimPoll is how often a hold looks for creates that came to
// wait at the gate meanwhile.
const (
	ClaimHold = time.Second
	ClaimPoll = 10 * time.Millisecond
)

// holdForCreates waits, before the refill starts a container on this
// machine, until the claims and the creates through the gate in flight
// have passed, or a create waits at the gate (it needs a container now,
// and takes the refill's), or until. A claim is a few milliseconds of the
// server's and its agent's CPU, and a container's start a few hundred of
// the engine's: a burst the pool serves is over sooner with its refill
// after it than beside it. A create through the gate starts a container
// itself, which one of the refill's beside it would slow: the first create
// of a template, which gives the template its pool, would wait for its
// own pool. An engine that starts containers elsewhere
// (sandbox.ParallelStarter) is not held.
func (p *Pool) holdForCreates(ctx context.Context, until time.Time) {
	if _, elsewhere := p.deps.Runtime.(sandbox.ParallelStarter); elsewhere {
		return
	}
	for {
		// A nil channel, of none in flight, never fires.
		claims, creates := p.claims.passed(), p.cold.running.passed()
		left := time.Until(until)
		if claims == nil && creates == nil || p.cold.queued() > 0 || left <= 0 {
			return
		}
		t := time.NewTimer(min(left, ClaimPoll))
		select {
		case <-claims:
		case <-creates:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}

// RemovalHold bounds how long a removal waits for a slot of its team's
// share (AdmitRemoval): removals come late while another team creates,
// but never starve.
const RemovalHold = 30 * time.Second

// AdmitRemoval waits, before the removal of a container of team's on
// this machine's engine, for a slot of team's share of the cold gate, and
// returns the function that gives it back: while another team within its
// share creates beside team (lightCreating), a removal
// takes the engine's time as a container's start does, and counts in
// team's share as its creates do. A burst's sandboxes, killed as their
// clients are done with them (or gave up on them), then come out of the
// burst's own share of the engine, not on top of the gate's size, where
// the other team's start waited behind them. The removal goes first among
// team's waiting creates; after RemovalHold, or when ctx ends, it goes
// without a slot. Otherwise, and on an engine that starts containers
// elsewhere (sandbox.ParallelStarter), it goes at once.
func (p *Pool) AdmitRemoval(ctx context.Context, team string) (release func()) {
	none := func() {}
	if _, elsewhere := p.deps.Runtime.(sandbox.ParallelStarter); elsewhere || !p.cold.lightCreating(team) {
		return none
	}
	g := &p.cold
	w := g.enterRemoval(team)
	if w == nil {
		return g.teamSlot(team)
	}
	t := time.NewTimer(RemovalHold)
	defer t.Stop()
	select {
	case <-w.admitted:
		return g.teamSlot(team)
	case <-t.C:
	case <-ctx.Done():
	}
	g.leave(w)
	return none
}

// enterRemoval takes a slot for a removal of team's at once (nil waiter)
// when one is free and team is within its share, or queues a waiter for
// it ahead of team's creates.
func (g *coldGate) enterRemoval(team string) *coldWaiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.takeLocked(team) {
		return nil
	}
	w := &coldWaiter{team: team, admitted: make(chan struct{}), removal: true}
	if len(g.queues[team]) == 0 {
		g.turns = append(g.turns, team)
	}
	g.queues[team] = append([]*coldWaiter{w}, g.queues[team]...)
	g.waiting++
	g.dispatch()
	return w
}

// takeLocked takes a slot for team when one is free and team holds less
// than its share, and reports whether it did. The caller holds g.mu.
func (g *coldGate) takeLocked(team string) bool {
	if g.used >= g.size || g.held[team] >= g.share(team) {
		return false
	}
	g.used++
	g.held[team]++
	return true
}

// teamSlot returns the function that gives back a slot held for work of
// team's other than a create: a removal, a refill for its claims.
func (g *coldGate) teamSlot(team string) (release func()) {
	return sync.OnceFunc(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.free(team)
	})
}

// takeShare takes a slot of team's share, for the refill's container
// that team's claims will take (pass.slot), when one is free now; it
// returns the function that gives it back.
func (g *coldGate) takeShare(team string) (release func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.takeLocked(team) {
		return nil, false
	}
	return g.teamSlot(team), true
}

// heaviest returns the team that holds and waits for the most of the
// gate's slots while another team creates within its share
// (lightCreating): the team whose burst the engine's work beyond the
// lighter teams' is for. "" when no team holds or waits for a slot, or
// none creates beside it.
func (g *coldGate) heaviest() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	load := map[string]int{}
	for team, n := range g.held {
		load[team] += n
	}
	for team, q := range g.queues {
		load[team] += len(q)
	}
	heavy, most := "", 0
	for team, n := range load {
		if n > most || n == most && team < heavy {
			heavy, most = team, n
		}
	}
	if heavy == "" || !g.lightCreatingLocked(heavy) {
		return ""
	}
	return heavy
}

// lightCreating reports whether, while several teams create (through
// the gate or from the pool, teams.active), one of them but except holds
// and waits for no more than its share of the slots: its creates are
// those that a burst of another team's must not slow.
func (g *coldGate) lightCreating(except string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lightCreatingLocked(except)
}

// lightCreatingLocked is lightCreating; the caller holds g.mu.
func (g *coldGate) lightCreatingLocked(except string) bool {
	at := g.teams.active()
	for team := range g.held {
		at[team] = true
	}
	for team := range g.queues {
		at[team] = true
	}
	if len(at) < 2 {
		return false
	}
	for team := range at {
		if team != except && g.held[team]+len(g.queues[team]) < g.share(team) {
			return true
		}
	}
	return false
}
