package warmpool

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/warrenhq/warren/internal/sandbox"
)

func TestColdGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &Pool{cold: newColdGate(), stock: newStock()}
		none := func() bool { return false }
		var releases []func()
		for range p.cold.size {
			release, _, err := p.AdmitCold(context.Background(), "t", none)
			if err != nil {
				t.Fatalf("admit within the gate's slots: %v", err)
			}
			releases = append(releases, release)
		}
		// A full gate: a create waits, and gets through when a slot frees.
		got := make(chan func(), 1)
		go func() {
			release, _, err := p.AdmitCold(context.Background(), "t", none)
			if err != nil {
				t.Errorf("a waiting create was refused when a slot freed: %v", err)
			}
			got <- release
		}()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("a create got through a full gate")
		default:
		}
		releases[0]()
		releases[0] = <-got

		// A full gate: a waiting create is offered every container the
		// pool readies, waits on when its claim does not take it, and is
		// done when one does.
		offers := make(chan bool, 2)
		offers <- false
		offers <- true
		claimed := make(chan bool, 1)
		go func() {
			release, ok, err := p.AdmitCold(context.Background(), "t", func() bool { return <-offers })
			if err != nil || release != nil {
				t.Errorf("a create the pool served: release %v, err %v; want none", release != nil, err)
			}
			claimed <- ok
		}()
		for range 2 {
			synctest.Wait()
			p.stock.put(pooled{kind: "base", sandboxID: sandbox.NewID()}, 10)
		}
		if !<-claimed {
			t.Error("a waiting create did not take the container the pool readied")
		}

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, err := p.AdmitCold(ctx, "t", none)
		wantKind(t, "admit with the client gone", err, sandbox.KindUnavailable)

		start := time.Now()
		_, _, err = p.AdmitCold(context.Background(), "t", none)
		wantKind(t, "admit that waits too long", err, sandbox.KindUnavailable)
		if waited := time.Since(start); waited != coldWait {
			t.Errorf("refused after %s, want %s", waited, coldWait)
		}

		p.cold.waiting = coldQueue
		start = time.Now()
		_, _, err = p.AdmitCold(context.Background(), "t", none)
		wantKind(t, "admit beyond the queue", err, sandbox.KindUnavailable)
		if waited := time.Since(start); waited != 0 {
			t.Errorf("refused beyond the queue after %s, want at once", waited)
		}
		p.cold.waiting = 0
		for _, release := range releases {
			release()
		}
		if _, _, err := p.AdmitCold(context.Background(), "t", none); err != nil {
			t.Errorf("admit into an empty gate: %v", err)
		}
	})
}

// gateRun admits creates at a gate and records the order they get
// through, for tests of the gate's turns.
type gateRun struct {
	t        *testing.T
	p        *Pool
	mu       sync.Mutex
	order    []string
	releases map[string]func()
}

// newGateRun returns a run on a gate of 8 slots, whatever the machine's
// CPUs.
func newGateRun(t *testing.T) *gateRun {
	r := &gateRun{t: t, p: &Pool{cold: newColdGate(), stock: newStock()}, releases: map[string]func(){}}
	r.p.cold.size = 8
	return r
}

// admit starts a create of team named who, and waits until it is
// through the gate or waiting there.
func (r *gateRun) admit(who, team string) {
	go func() {
		release, _, err := r.p.AdmitCold(context.Background(), team, func() bool { return false })
		if err != nil {
			r.t.Errorf("%s: %v", who, err)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.order = append(r.order, who)
		r.releases[who] = release
	}()
	synctest.Wait()
}

// release ends who's create and returns the creates that got through
// since the last call.
func (r *gateRun) release(who string) []string {
	r.mu.Lock()
	release := r.releases[who]
	delete(r.releases, who)
	r.mu.Unlock()
	if release == nil {
		r.t.Fatalf("%s holds no slot", who)
	}
	release()
	synctest.Wait()
	return r.through()
}

// through returns the creates that got through since the last call.
func (r *gateRun) through() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.order
	r.order = nil
	return out
}

// TestColdGateTurns: slots that free go to the teams in turn, each
// team's creates in order, and while several teams wait, a team holds no
// more than its share of the slots (the gate's size over the teams,
// rounded up): one team's burst at the gate neither holds another team's
// create behind all of it nor fills the engine beside it. A team alone
// has every slot again.
func TestColdGateTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRun(t)
		size := r.p.cold.size
		for i := range size {
			r.admit(fmt.Sprintf("x%d", i), "a")
		}
		if got := r.through(); len(got) != size {
			t.Fatalf("a team alone got %d slots at once, want all %d", len(got), size)
		}
		for i := range 5 {
			r.admit(fmt.Sprintf("a%d", i), "a")
		}
		r.admit("b0", "b")
		r.admit("c0", "c")
		r.admit("b1", "b")
		if got := r.through(); len(got) != 0 {
			t.Fatalf("%v got through a full gate", got)
		}
		share := (size + 2) / 3
		var got [][]string
		for i := range size {
			got = append(got, r.release(fmt.Sprintf("x%d", i)))
		}
		// b and c get the first slots a frees; a's own waiting creates
		// only once it holds fewer than its share.
		var want [][]string
		for i := range size {
			switch left := size - 1 - i; {
			case i < 3:
				want = append(want, []string{[]string{"b0", "c0", "b1"}[i]})
			case left < share:
				want = append(want, []string{fmt.Sprintf("a%d", share-1-left)})
			default:
				want = append(want, nil)
			}
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("got through at each slot a freed (-want +got):\n%s", diff)
		}
		// As the other teams finish, a's share grows: half the slots
		// with b alone beside it, all of them alone.
		if got := r.release("b0"); len(got) != 0 {
			t.Errorf("%v got through a slot b freed while a held its share", got)
		}
		if got := r.release("c0"); !slices.Equal(got, []string{"a3"}) {
			t.Errorf("once c was done, %v got through; want a3 (a's share of two teams' slots)", got)
		}
		if got := r.release("b1"); !slices.Equal(got, []string{"a4"}) {
			t.Errorf("once b was done too, %v got through; want a4", got)
		}
		for _, who := range []string{"a0", "a1", "a2", "a3", "a4"} {
			r.release(who)
		}
	})
}

// TestColdGateShareWithPoolTeams: a team whose creates the pool serves
// does not wait at the gate, yet while it creates, a burst of another
// team holds half the slots, the refill may borrow the others, and the
// burst holds all of them once the other team has not created for
// ActiveWindow.
func TestColdGateShareWithPoolTeams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRun(t)
		size := r.p.cold.size
		r.p.cold.teams.begin("b")() // a create of b from the pool, done
		for i := range size + 2 {
			r.admit(fmt.Sprintf("a%d", i), "a")
		}
		if got := r.through(); len(got) != size/2 {
			t.Fatalf("with another team creating, a burst got %d slots (%v), want %d", len(got), got, size/2)
		}
		// The refill may borrow the slots the burst may not take.
		select {
		case <-r.p.cold.spared:
		default:
			t.Error("the gate left slots free with creates waiting and did not tell the refill")
		}
		var spares []func()
		for {
			release, ok := r.p.cold.takeSpare()
			if !ok {
				break
			}
			spares = append(spares, release)
		}
		if len(spares) != size-size/2 {
			t.Errorf("the refill borrowed %d slots, want the %d the burst may not take", len(spares), size-size/2)
		}
		for _, release := range spares {
			release()
		}
		time.Sleep(ActiveWindow + time.Second)
		if got := r.release("a0"); len(got) != size/2+1 {
			t.Errorf("once the other team was idle, a freed slot let %d through (%v), want %d", len(got), got, size/2+1)
		}
		for i := 1; i < size+2; i++ {
			r.release(fmt.Sprintf("a%d", i))
		}
	})
}

// TestColdGateClaimsByTeam: a container the pool readies is offered to
// the first waiting create of each team that is not claiming one already:
// b's one create tries for every container, however many of a's wait, and
// a's first, claiming, is not offered another.
func TestColdGateClaimsByTeam(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &Pool{cold: newColdGate(), stock: newStock()}
		none := func() bool { return false }
		var releases []func()
		for range p.cold.size {
			release, _, _ := p.AdmitCold(context.Background(), "a", none)
			releases = append(releases, release)
		}
		var mu sync.Mutex
		tried := map[string]int{}
		ctx, cancel := context.WithCancel(context.Background())
		held := make(chan struct{}) // a0's claim lasts until closed, as a create does
		for i, team := range []string{"a", "a", "a", "a", "a", "b"} {
			go p.AdmitCold(ctx, team, func() bool {
				who := fmt.Sprintf("%s%d", team, i)
				mu.Lock()
				tried[who]++
				mu.Unlock()
				if who == "a0" {
					<-held
				}
				return false
			})
			synctest.Wait()
		}
		for range 2 {
			p.stock.put(pooled{kind: "base", sandboxID: sandbox.NewID()}, 10)
			synctest.Wait()
		}
		mu.Lock()
		if a := tried["a1"] + tried["a2"] + tried["a3"] + tried["a4"]; tried["b5"] != 2 || tried["a0"] != 1 || a >= 8 {
			t.Errorf("claims tried %v, want b5 twice, a0 once (it claims still), and not every other of a's each time", tried)
		}
		mu.Unlock()
		close(held)
		cancel()
		synctest.Wait()
		for _, release := range releases {
			release()
		}
	})
}

func wantKind(t *testing.T, what string, err error, kind sandbox.Kind) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want kind %d", what, kind)
		return
	}
	if got := sandbox.KindOf(err); got != kind {
		t.Errorf("%s: kind %d (%v), want %d", what, got, err, kind)
	}
}

// TestClaimLeavesOneForLighterTeams: while another team creates with
// fewer creates in flight, a team's claim leaves the pool's last
// container to it; the lighter team takes it, and once the other team is
// idle for ActiveWindow, the burst takes every container again.
func TestClaimLeavesOneForLighterTeams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &Pool{cold: newColdGate(), stock: newStock()}
		put := func() {
			p.stock.put(pooled{kind: "base", sandboxID: sandbox.NewID(), imageID: "img"}, 10)
		}
		claim := func(team string) bool {
			c, ok := p.Claim(team, "base", "img", "")
			if ok {
				c.Done()
			}
			return ok
		}
		for range 3 {
			defer p.cold.teams.begin("a")()
		}
		p.cold.teams.begin("b")() // b created a moment ago
		put()
		put()
		if !claim("a") {
			t.Fatal("a's claim missed with two containers in the pool")
		}
		if claim("a") {
			t.Fatal("a's claim took the last container while b, with fewer creates in flight, creates")
		}
		end := p.cold.teams.begin("b")
		if !claim("b") {
			t.Fatal("b's claim missed the container kept for it")
		}
		end()
		put()
		time.Sleep(ActiveWindow + time.Second)
		if !claim("a") {
			t.Error("a's claim missed the last container once b was idle")
		}
	})
}

// TestClaimKeepsALighterTeamsRate: a claim of a bursting team leaves as
// many containers as the lighter team began within a refill's time (one
// a second, the rate it asks for), not one, which its next create would
// find gone.
func TestClaimKeepsALighterTeamsRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &Pool{cold: newColdGate(), stock: newStock()}
		for range 10 {
			defer p.cold.teams.begin("a")()
		}
		for range 3 { // b's creates within the last refill span (rateSpan, with no demand kept)
			p.cold.teams.begin("b")()
			time.Sleep(rateSpan / 4)
		}
		for range 4 {
			p.stock.put(pooled{kind: "base", sandboxID: sandbox.NewID(), imageID: "img"}, 10)
		}
		taken := 0
		for {
			c, ok := p.Claim("a", "base", "img", "")
			if !ok {
				break
			}
			c.Done()
			taken++
		}
		if taken != 1 {
			t.Errorf("a's claims took %d of the 4 containers, want 1: 3 are b's, which began 3 creates within a refill", taken)
		}
	})
}

// TestRemovalTakesTheTeamsShare: a removal of a team alone goes at once,
// whatever the gate holds; while another team creates, it waits for a
// slot of its own team's share, ahead of that team's creates.
func TestRemovalTakesTheTeamsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &Pool{cold: newColdGate(), stock: newStock()}
		none := func() bool { return false }
		defer p.cold.teams.begin("a")()
		var releases []func()
		for range p.cold.size {
			release, _, err := p.AdmitCold(context.Background(), "a", none)
			if err != nil {
				t.Fatalf("a's create: %v", err)
			}
			releases = append(releases, release)
		}
		p.AdmitRemoval(context.Background(), "a")() // a alone: at once

		p.cold.teams.begin("b")() // b creates from the pool
		queued := make(chan struct{})
		go func() {
			_, _, err := p.AdmitCold(context.Background(), "a", none)
			if err != nil {
				t.Errorf("a's queued create: %v", err)
			}
			close(queued)
		}()
		admitted := make(chan func())
		go func() { admitted <- p.AdmitRemoval(context.Background(), "a") }()
		synctest.Wait()
		share := p.cold.size / 2
		for i := range p.cold.size - share + 1 {
			select {
			case <-admitted:
				t.Fatalf("a's removal went with %d of a's slots held, more than its share of %d", p.cold.size-i, share)
			default:
			}
			releases[i]()
			synctest.Wait()
		}
		var release func()
		select {
		case release = <-admitted:
		default:
			t.Fatalf("a's removal still waits with %d of a's slots held, within its share of %d", share-1, share)
		}
		select {
		case <-queued:
			t.Error("a's create went before a's removal")
		default:
		}
		release()
		<-queued // the removal's slot goes on to it
	})
}
