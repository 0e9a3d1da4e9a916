package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/store"
)

// answersStore adds kept call answers, in memory, to a store no replicas
// share: what PostgreSQL keeps in its table.
type answersStore struct {
	store.Store
	mu      sync.Mutex // guards answers
	answers map[string]store.CallAnswer
}

func (s *answersStore) CallAnswer(_ context.Context, key string) (store.CallAnswer, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.answers[key]
	return a, ok, nil
}

func (s *answersStore) SaveCallAnswer(_ context.Context, key string, a store.CallAnswer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.answers[key]; !ok {
		s.answers[key] = a
	}
	return nil
}

// A leader lost during a forwarded create, after making its sandbox and
// before its answer reached the follower: the follower sends the create
// again, with its key, to the next leader, and the client gets the
// sandbox the first try made, one sandbox in all. A kill cut the same way
// is answered 204 again, not 404.
func TestForwardedCallSentAgainToTheNextLeader(t *testing.T) {
	deps := testDeps(t)
	deps.Store = &answersStore{Store: deps.Store, answers: map[string]store.CallAnswer{}}
	leader := openReplica(t, deps, newFakeLeadership(true), time.Second)
	lu, _ := url.Parse(leader.URL())
	fl := newFakeLeadership(false)
	follower := openReplica(t, deps, fl, 5*time.Second)

	// The lost leader passes the call on to the real one, which does it,
	// and drops the follower's connection instead of answering.
	var tries atomic.Int32
	lost := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tries.Add(1)
		out, _ := http.NewRequest(r.Method, leader.URL()+r.URL.Path, r.Body)
		out.Header = r.Header.Clone()
		if res, err := http.DefaultClient.Do(out); err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		fl.setLeader(lu.Host)
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close()
	}))
	defer lost.Close()
	cut := func() {
		u, _ := url.Parse(lost.URL)
		fl.setLeader(u.Host)
	}

	cut()
	res, sb := call(t, "POST", follower.URL()+"/sandboxes", map[string]any{"templateID": "base"}, nil)
	if res.StatusCode != 201 || tries.Load() != 1 {
		t.Fatalf("create through a leader lost during it: %d %v (lost leader tried %d times)", res.StatusCode, sb, tries.Load())
	}
	if n := len(deps.Runtime.(*fake.Runtime).Containers()); n != 1 {
		t.Fatalf("%d containers, want the one sandbox the first try made", n)
	}
	id, _ := sb["sandboxID"].(string)
	if res, got := call(t, "GET", follower.URL()+"/sandboxes/"+id, nil, nil); res.StatusCode != 200 || got["state"] != "running" {
		t.Fatalf("the sandbox answered: %d %v", res.StatusCode, got)
	}
	cut()
	if res, body := call(t, "DELETE", follower.URL()+"/sandboxes/"+id, nil, nil); res.StatusCode != 204 || tries.Load() != 2 {
		t.Fatalf("kill through a leader lost during it: %d %v, want 204", res.StatusCode, body)
	}
	if res, _ := call(t, "GET", follower.URL()+"/sandboxes/"+id, nil, nil); res.StatusCode != 404 {
		t.Fatalf("the killed sandbox: %d, want 404", res.StatusCode)
	}
}

// A leader whose node vanished during a forwarded call never answers, nor
// closes the connection: once the Lease has passed to another replica and
// lostGrace has gone by, the follower sends the call to the new leader.
func TestForwardedCallLeavesAVanishedLeader(t *testing.T) {
	deps := testDeps(t)
	deps.Store = &answersStore{Store: deps.Store, answers: map[string]store.CallAnswer{}}
	leader := openReplica(t, deps, newFakeLeadership(true), time.Second)
	lu, _ := url.Parse(leader.URL())
	fl := newFakeLeadership(false)
	follower := openReplica(t, deps, fl, 20*time.Second)
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server sees its client go once the body is read
		fl.setLeader(lu.Host)
		<-r.Context().Done()
	}))
	defer gone.Close()
	gu, _ := url.Parse(gone.URL)
	fl.setLeader(gu.Host)
	start := time.Now()
	res, sb := call(t, "POST", follower.URL()+"/sandboxes", map[string]any{"templateID": "base"}, nil)
	if res.StatusCode != 201 {
		t.Fatalf("create through a leader that vanished: %d %v", res.StatusCode, sb)
	}
	if took := time.Since(start); took < lostGrace || took > lostGrace+5*time.Second {
		t.Errorf("answered after %v, want about lostGrace (%v)", took, lostGrace)
	}
	if n := len(deps.Runtime.(*fake.Runtime).Containers()); n != 1 {
		t.Fatalf("%d containers, want 1", n)
	}
}
