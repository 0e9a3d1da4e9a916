package events_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/sandbox"
)

// stalled is a receiver that accepts every request and never answers.
type stalled struct {
	srv *httptest.Server

	mu    sync.Mutex // guards calls
	calls int
}

func newStalled(t *testing.T) *stalled {
	st := &stalled{}
	hang := make(chan struct{})
	st.srv = httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		st.calls++
		st.mu.Unlock()
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hang); st.srv.Close() })
	return st
}

func (st *stalled) count() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.calls
}

// One team's receivers that never answer hold that team's share of the
// dispatcher, not everyone's: with team B's 100 webhooks stalled (for
// an hour, the attempt's limit here), team C's delivery still arrives,
// and B never has more than its share of attempts open.
func TestStalledTeamDoesNotDelayOthers(t *testing.T) {
	db := openStore(t, ":memory:")
	sink := newStalled(t)
	ok := newReceiver(t, 0)
	s := events.New(events.Config{Store: db, AllowPrivate: true, Timeout: time.Hour})
	s.Start(context.Background())
	t.Cleanup(s.Close)
	ctx := context.Background()
	for range 100 {
		hook(t, s, "teamB", sink.srv.URL)
	}
	s.Record(ctx, event("teamB", "isbB", sandbox.EventCreated))
	waitFor(t, "team B's attempts to fill its share", func() bool { return sink.count() >= events.PerTeam })

	hook(t, s, "teamC", ok.srv.URL)
	s.Record(ctx, event("teamC", "isbC", sandbox.EventCreated))
	waitFor(t, "team C's delivery", func() bool { return len(ok.deliveries()) == 1 })
	if n := sink.count(); n != events.PerTeam {
		t.Errorf("team B has %d attempts open, want its share, %d", n, events.PerTeam)
	}
}
