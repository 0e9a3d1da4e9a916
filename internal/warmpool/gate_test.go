package warmpool

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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

// TestColdGateTurns: slots that free go to the teams in turn, each
// team's creates in order, so that one team's burst waiting at the gate
// does not hold another team's create behind all of it.
func TestColdGateTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &Pool{cold: newColdGate(), stock: newStock()}
		none := func() bool { return false }
		var releases []func()
		for range p.cold.size {
			release, _, err := p.AdmitCold(context.Background(), "a", none)
			if err != nil {
				t.Fatal(err)
			}
			releases = append(releases, release)
		}
		order := make(chan string, 20)
		enqueue := func(who, team string) {
			go func() {
				release, _, err := p.AdmitCold(context.Background(), team, none)
				if err != nil {
					t.Errorf("%s: %v", who, err)
					return
				}
				order <- who
				releases = append(releases, release)
			}()
			synctest.Wait()
		}
		for i := range 5 {
			enqueue(fmt.Sprintf("a%d", i), "a")
		}
		enqueue("b0", "b")
		enqueue("c0", "c")
		enqueue("b1", "b")
		var got []string
		for i := range 8 {
			releases[i]()
			synctest.Wait()
			got = append(got, <-order)
		}
		want := []string{"a0", "b0", "c0", "a1", "b1", "a2", "a3", "a4"}
		if !slices.Equal(got, want) {
			t.Errorf("admitted in the order %v, want %v", got, want)
		}
		for _, release := range releases[8:] {
			release()
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
