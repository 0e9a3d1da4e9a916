package lifecycle

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

func TestColdGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &Manager{cold: newColdGate()}
		var releases []func()
		for range cap(m.cold.slots) {
			release, err := m.admitCold(context.Background())
			if err != nil {
				t.Fatalf("admit within the gate's slots: %v", err)
			}
			releases = append(releases, release)
		}
		// A full gate: a create waits, and gets through when a slot frees.
		got := make(chan func(), 1)
		go func() {
			release, err := m.admitCold(context.Background())
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

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := m.admitCold(ctx)
		wantKind(t, "admit with the client gone", err, sandbox.KindUnavailable)

		start := time.Now()
		_, err = m.admitCold(context.Background())
		wantKind(t, "admit that waits too long", err, sandbox.KindUnavailable)
		if waited := time.Since(start); waited != coldWait {
			t.Errorf("refused after %s, want %s", waited, coldWait)
		}

		m.cold.waiting = coldQueue
		start = time.Now()
		_, err = m.admitCold(context.Background())
		wantKind(t, "admit beyond the queue", err, sandbox.KindUnavailable)
		if waited := time.Since(start); waited != 0 {
			t.Errorf("refused beyond the queue after %s, want at once", waited)
		}
		m.cold.waiting = 0
		for _, release := range releases {
			release()
		}
		if _, err := m.admitCold(context.Background()); err != nil {
			t.Errorf("admit into an empty gate: %v", err)
		}
	})
}
