package warmpool

import (
	"context"
	"fmt"
	"runtime"
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

// coldGate admits creates that make their own container.
type coldGate struct {
	slots   chan struct{}
	running gauge // the creates let through
	mu      sync.Mutex
	waiting int
}

// newColdGate admits 4 creates per CPU at once: the engine serialises
// much of a container's create and start, so more in flight only share
// the same throughput out, later for each.
func newColdGate() coldGate {
	return coldGate{slots: make(chan struct{}, max(4*runtime.NumCPU(), 4))}
}

// AdmitCold waits for the gate to let a create through and returns the
// function that lets the next one. While it waits, every container the
// warm pool readies (a refill runs beside the burst, and grows the pool
// for it) is offered to claim, which reports whether it took it: then
// AdmitCold returns claimed true and no release, and the create is the
// pool's. A create is refused when coldQueue others wait already, or when
// it waited coldWait or until ctx ended.
func (p *Pool) AdmitCold(ctx context.Context, claim func() bool) (release func(), claimed bool, err error) {
	g := &p.cold
	select {
	case g.slots <- struct{}{}:
		return g.admitted(), false, nil
	default:
	}
	g.mu.Lock()
	if g.waiting >= coldQueue {
		g.mu.Unlock()
		return nil, false, sandbox.Busy(fmt.Sprintf(
			"the server is creating as many sandboxes as it can (%d waiting to start): retry in a few seconds", coldQueue), BusyRetry)
	}
	g.waiting++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
	}()
	t := time.NewTimer(coldWait)
	defer t.Stop()
	for {
		added := p.stock.readied()
		select {
		case g.slots <- struct{}{}:
			return g.admitted(), false, nil
		case <-added:
			if claim() {
				return nil, true, nil
			}
		case <-t.C:
			return nil, false, sandbox.Busy(fmt.Sprintf(
				"the sandbox could not start within %s: the server is busy creating others; retry later", coldWait), BusyRetry)
		case <-ctx.Done():
			return nil, false, sandbox.Wrap(sandbox.KindUnavailable, ctx.Err(), "the create was cancelled while waiting to start")
		}
	}
}

// admitted counts in a create given a slot, and returns the function
// that counts it out and frees the slot.
func (g *coldGate) admitted() (release func()) {
	end := g.running.begin()
	return func() {
		end()
		<-g.slots
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
