package lifecycle

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// newFollower is a second Manager on the leader's store and engine that
// follows (a replica that does not lead).
func newFollower(t *testing.T, leader *env, resume func(ctx context.Context, id string) error) *Manager {
	t.Helper()
	m, err := New(Deps{Runtime: leader.rt, Agent: leader.agent, Store: leader.store, Resume: resume}, testSettings())
	if err != nil {
		t.Fatal(err)
	}
	m.Follow()
	t.Cleanup(func() { m.Close() })
	return m
}

func TestFollowerReadsTheLeadersWrites(t *testing.T) {
	e := newEnv(t, nil)
	f := newFollower(t, e, nil)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{Metadata: map[string]string{"k": "v"}})
	got, err := f.Get(ctx, team, sb.ID)
	if err != nil || got.State != sandbox.StateRunning {
		t.Fatalf("follower Get after create = %v, %v; want running", got.State, err)
	}
	if r, err := f.Route(ctx, sb.ID, nil); err != nil || r.ID != sb.ID {
		t.Fatalf("follower Route = %v, %v", r.ID, err)
	}
	if list, _, err := f.List(ctx, ListRequest{TeamID: team}); err != nil || len(list) != 1 {
		t.Fatalf("follower List = %d sandboxes, %v; want 1", len(list), err)
	}
	if err := e.m.Pause(ctx, team, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	_, err = f.Route(ctx, sb.ID, nil)
	wantKind(t, "route to a paused sandbox without auto-resume", err, sandbox.KindUnavailable)
	if err := e.m.Kill(ctx, team, sb.ID); err != nil {
		t.Fatal(err)
	}
	_, err = f.Get(ctx, team, sb.ID)
	wantKind(t, "follower Get after kill", err, sandbox.KindNotFound)
	if list, _, _ := f.List(ctx, ListRequest{TeamID: team}); len(list) != 0 {
		t.Fatalf("follower lists %d sandboxes after the kill, want 0", len(list))
	}
}

func TestFollowerHasTheLeaderResume(t *testing.T) {
	e := newEnv(t, nil)
	var asked []string
	f := newFollower(t, e, func(ctx context.Context, id string) error {
		asked = append(asked, id)
		_, err := e.m.Route(ctx, id, nil)
		return err
	})
	ctx := context.Background()
	sb := e.create(t, CreateRequest{Lifecycle: sandbox.Lifecycle{AutoResume: true, OnTimeout: sandbox.TimeoutPause}})
	if err := e.m.Pause(ctx, team, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	got, err := f.Route(ctx, sb.ID, nil)
	if err != nil || got.State != sandbox.StateRunning || len(asked) != 1 {
		t.Fatalf("follower Route of a paused auto-resume sandbox = %v, %v (leader asked %d times); want running after one ask", got.State, err, len(asked))
	}
}

func TestFollowerLeadsAdoptingWhatTheLeaderLeft(t *testing.T) {
	e := newEnv(t, nil)
	f := newFollower(t, e, nil)
	sb := e.create(t, CreateRequest{Timeout: time.Minute})
	// The leader goes without a clean stop: its loops end, its sandboxes stay.
	e.m.cancel()
	e.m.wg.Wait()
	if err := f.Lead(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Following() {
		t.Fatal("Following after Lead")
	}
	got, err := f.Get(context.Background(), team, sb.ID)
	if err != nil || got.State != sandbox.StateRunning || got.EndAt != sb.EndAt {
		t.Fatalf("the new leader's view = %+v, %v; want it running until %v", got, err, sb.EndAt)
	}
	if _, ok := e.container(t, sb.ContainerID); !ok {
		t.Fatal("the new leader removed the sandbox's container")
	}
}

// slowListStore is a store whose ListSandboxes waits for release once
// listing is closed (a large store on a loaded PostgreSQL).
type slowListStore struct {
	sandbox.Store
	listing, release chan struct{}
}

func (s *slowListStore) ListSandboxes(ctx context.Context, f sandbox.SandboxFilter) ([]sandbox.Sandbox, error) {
	select {
	case <-s.listing:
	default:
		close(s.listing)
		<-s.release
	}
	return s.Store.ListSandboxes(ctx, f)
}

// A follower becoming leader routes and reads every running sandbox all
// along, also while it loads the store.
func TestFollowerRoutesWhileItBecomesLeader(t *testing.T) {
	e := newEnv(t, nil)
	st := &slowListStore{Store: e.store, listing: make(chan struct{}), release: make(chan struct{})}
	f, err := New(Deps{Runtime: e.rt, Agent: e.agent, Store: st}, testSettings())
	if err != nil {
		t.Fatal(err)
	}
	f.Follow()
	sb := e.create(t, CreateRequest{Timeout: time.Minute})
	e.m.cancel()
	e.m.wg.Wait()
	lead := make(chan error, 1)
	go func() { lead <- f.Lead(context.Background()) }()
	<-st.listing
	ctx := context.Background()
	got, err := f.Route(ctx, sb.ID, nil)
	if err != nil || got.ID != sb.ID {
		t.Errorf("route while becoming leader = %q, %v; want the running sandbox", got.ID, err)
	}
	if _, err := f.Get(ctx, team, sb.ID); err != nil {
		t.Errorf("get while becoming leader: %v", err)
	}
	close(st.release)
	if err := <-lead; err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, err := f.Route(ctx, sb.ID, nil); err != nil || got.ID != sb.ID {
		t.Fatalf("route once leading = %q, %v; want the running sandbox", got.ID, err)
	}
}

// awayStore is a store that cannot be read while away is set (a
// PostgreSQL restart).
type awayStore struct {
	sandbox.Store
	away atomic.Bool
}

func (s *awayStore) GetSandbox(ctx context.Context, id string) (sandbox.Sandbox, error) {
	if s.away.Load() {
		return sandbox.Sandbox{}, sandbox.Errorf(sandbox.KindUnavailable, "the store is restarting")
	}
	return s.Store.GetSandbox(ctx, id)
}

func (s *awayStore) PutSandbox(ctx context.Context, sb sandbox.Sandbox, evs ...sandbox.Recorded) error {
	if s.away.Load() {
		return sandbox.Busy("the store is restarting", time.Second)
	}
	return s.Store.PutSandbox(ctx, sb, evs...)
}

// A change the leader cannot save while the store is away fails as the
// store does, unavailable with a Retry-After (503 at the API), not as an
// internal error, and is not done, nor its event stored; both are once
// the store is back.
func TestChangeWhileTheStoreIsAway(t *testing.T) {
	var st *awayStore
	log := &eventLog{}
	e := newEnv(t, func(c *config) {
		st = &awayStore{Store: c.Store}
		c.Store = st
		c.Events = log
	})
	sb := e.create(t, CreateRequest{})
	st.away.Store(true)
	err := e.m.SetTimeout(context.Background(), team, sb.ID, time.Hour)
	wantKind(t, "a change while the store is away", err, sandbox.KindUnavailable)
	if sandbox.RetryAfter(err) == 0 {
		t.Errorf("a change while the store is away: %v says no Retry-After", err)
	}
	// A pause freezes the container before it saves: not saved, it thaws
	// it again, so the sandbox runs on as its record says.
	err = e.m.Pause(context.Background(), team, sb.ID, true)
	wantKind(t, "a pause while the store is away", err, sandbox.KindUnavailable)
	if c, err := e.rt.Inspect(context.Background(), sb.ContainerID); err != nil || c.Paused {
		t.Errorf("after a pause that was not saved the container is %+v, %v; want it running, not frozen", c, err)
	}
	st.away.Store(false)
	if err := e.m.SetTimeout(context.Background(), team, sb.ID, time.Hour); err != nil {
		t.Errorf("the change once the store is back: %v", err)
	}
	if err := e.m.Pause(context.Background(), team, sb.ID, true); err != nil {
		t.Errorf("the pause once the store is back: %v", err)
	}
	var types []sandbox.EventType
	for _, ev := range log.of(sb.ID) {
		types = append(types, ev.Type)
	}
	if want := []sandbox.EventType{sandbox.EventCreated, sandbox.EventUpdated, sandbox.EventPaused}; !slices.Equal(types, want) {
		t.Errorf("events stored %v, want %v: none of the changes the store refused", types, want)
	}
}

// While the store is away, a follower routes to the running sandboxes it
// read last; it does not make up others.
func TestFollowerRoutesWhileTheStoreIsAway(t *testing.T) {
	e := newEnv(t, nil)
	st := &awayStore{Store: e.store}
	f, err := New(Deps{Runtime: e.rt, Agent: e.agent, Store: st}, testSettings())
	if err != nil {
		t.Fatal(err)
	}
	f.Follow()
	ctx := context.Background()
	seen, unseen := e.create(t, CreateRequest{}), e.create(t, CreateRequest{})
	if _, err := f.Route(ctx, seen.ID, nil); err != nil {
		t.Fatal(err)
	}
	st.away.Store(true)
	if got, err := f.Route(ctx, seen.ID, nil); err != nil || got.ID != seen.ID {
		t.Fatalf("route while the store is away = %v, %v; want the sandbox read before", got.ID, err)
	}
	_, err = f.Route(ctx, unseen.ID, nil)
	wantKind(t, "route to a sandbox never read, while the store is away", err, sandbox.KindNotFound)
}
