package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/runtime/fake"
)

const replicaKey = "e2b_0123456789abcdef0123456789abcdef01234567"

// fakeLeadership elects by hand: a leader leads from Run, a follower is
// told where the leader is (setLeader).
type fakeLeadership struct {
	leads  bool
	forced bool // what Forced says: the replica's pod force-deleted

	mu      sync.Mutex // guards leader, changed and asked
	leader  string     // address; "" = none known
	changed chan struct{}
	asked   chan struct{} // closed when asked for the leader while none is known
}

func newFakeLeadership(leads bool) *fakeLeadership {
	return &fakeLeadership{leads: leads, changed: make(chan struct{}), asked: make(chan struct{})}
}

func (f *fakeLeadership) Run(ctx context.Context, lead func(context.Context), lost func()) {
	defer lost()
	if f.leads {
		go lead(ctx)
	}
	<-ctx.Done()
	f.leads = false // released
}

func (f *fakeLeadership) Leader(context.Context) (string, bool, error) {
	if f.leads {
		return "", true, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leader == "" {
		select {
		case <-f.asked:
		default:
			close(f.asked)
		}
		return "", false, errNoLeader
	}
	return f.leader, false, nil
}

func (f *fakeLeadership) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *fakeLeadership) Unreachable(string) {}

func (f *fakeLeadership) Forced(context.Context) bool { return f.forced }

func (f *fakeLeadership) setLeader(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leader = addr
	close(f.changed)
	f.changed = make(chan struct{})
}

// openReplica opens a replica on deps (shared with the others) with el.
func openReplica(t *testing.T, deps Deps, el *fakeLeadership, wait time.Duration) *Server {
	t.Helper()
	cfg := testConfig(t)
	cfg.APIKey = replicaKey
	deps.Leadership, deps.ForwardSecret = el, "a secret the replicas share"
	deps.LostLeadership = func() { t.Error("lost the leadership") }
	srv := New(cfg, deps)
	srv.leaderWait = wait
	if err := srv.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func call(t *testing.T, method, u string, body any, hdr map[string]string) (*http.Response, map[string]any) {
	t.Helper()
	var b bytes.Buffer
	if body != nil {
		json.NewEncoder(&b).Encode(body)
	}
	req, _ := http.NewRequest(method, u, &b)
	req.Header.Set("X-API-Key", replicaKey)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	json.NewDecoder(res.Body).Decode(&out)
	return res, out
}

// A follower forwards a create to the leader and reads what it made
// from the store; the leader is the one that holds the sandbox.
func TestFollowerForwardsChangesAndServesReads(t *testing.T) {
	deps := testDeps(t)
	leader := openReplica(t, deps, newFakeLeadership(true), time.Second)
	fl := newFakeLeadership(false)
	follower := openReplica(t, deps, fl, 5*time.Second)
	u, _ := url.Parse(leader.URL())
	fl.setLeader(u.Host)

	res, sb := call(t, "POST", follower.URL()+"/sandboxes", map[string]any{"templateID": "base"}, nil)
	if res.StatusCode != 201 {
		t.Fatalf("create through the follower: %d %v", res.StatusCode, sb)
	}
	id, _ := sb["sandboxID"].(string)
	res, got := call(t, "GET", follower.URL()+"/sandboxes/"+id, nil, nil)
	if res.StatusCode != 200 || got["state"] != "running" {
		t.Fatalf("read through the follower: %d %v", res.StatusCode, got)
	}
	if n := len(deps.Runtime.(*fake.Runtime).Containers()); n != 1 {
		t.Fatalf("%d containers, want the one the leader made", n)
	}
	res, _ = call(t, "DELETE", follower.URL()+"/sandboxes/"+id, nil, nil)
	if res.StatusCode != 204 {
		t.Fatalf("kill through the follower: %d", res.StatusCode)
	}
	if res, _ = call(t, "GET", follower.URL()+"/sandboxes/"+id, nil, nil); res.StatusCode != 404 {
		t.Fatalf("read of the killed sandbox through the follower: %d, want 404", res.StatusCode)
	}
}

// With no leader, a change waits for one, and past the wait is refused
// with 503 and Retry-After; reads still work. One that comes in time goes
// through.
func TestFollowerWaitsForALeader(t *testing.T) {
	deps := testDeps(t)
	fl := newFakeLeadership(false)
	follower := openReplica(t, deps, fl, 300*time.Millisecond)
	start := time.Now()
	res, body := call(t, "POST", follower.URL()+"/sandboxes", map[string]any{"templateID": "base"}, nil)
	if res.StatusCode != 503 || res.Header.Get("Retry-After") == "" || body["code"] != float64(503) {
		t.Fatalf("create with no leader: %d Retry-After=%q %v; want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("answered after %v, before the wait", waited)
	}
	if res, _ = call(t, "GET", follower.URL()+"/sandboxes", nil, nil); res.StatusCode != 200 {
		t.Fatalf("list with no leader: %d", res.StatusCode)
	}

	follower.Close()
	fl = newFakeLeadership(false)
	follower = openReplica(t, deps, fl, 10*time.Second)
	leader := openReplica(t, deps, newFakeLeadership(true), time.Second)
	go func() {
		<-fl.asked // a leader elected while the call waits
		u, _ := url.Parse(leader.URL())
		fl.setLeader(u.Host)
	}()
	if res, body = call(t, "POST", follower.URL()+"/sandboxes", map[string]any{"templateID": "base"}, nil); res.StatusCode != 201 {
		t.Fatalf("create while a leader is elected: %d %v", res.StatusCode, body)
	}
}

// Only a replica may mark a call forwarded or ask the leader's internal
// endpoint: without the shared secret's proof, neither is taken.
func TestForwardingNeedsTheReplicasProof(t *testing.T) {
	deps := testDeps(t)
	fl := newFakeLeadership(false)
	follower := openReplica(t, deps, fl, 200*time.Millisecond)
	res, _ := call(t, "POST", follower.URL()+"/sandboxes", map[string]any{"templateID": "base"}, map[string]string{headerForwarded: "guess"})
	if res.Header.Get(headerNotLeader) != "" || res.Header.Get("Retry-After") == "" {
		t.Fatalf("a call with a forged forwarding mark was taken as forwarded: %d %v", res.StatusCode, res.Header)
	}
	leader := openReplica(t, deps, newFakeLeadership(true), time.Second)
	for deadline := time.Now().Add(5 * time.Second); !leader.leading.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not leading")
		}
	}
	for _, h := range []map[string]string{nil, {headerForwarded: "guess"}} {
		if res, _ := call(t, "POST", leader.URL()+resumePrefix+"x", nil, h); res.StatusCode != 404 {
			t.Fatalf("the internal endpoint with %v: %d, want 404", h, res.StatusCode)
		}
	}
	if res, _ := call(t, "POST", leader.URL()+resumePrefix+"x", nil, map[string]string{headerForwarded: forwardProof("a secret the replicas share")}); res.StatusCode != 404 {
		t.Fatalf("the internal endpoint for an unknown sandbox, with the proof: %d, want 404 (sandbox not found)", res.StatusCode)
	}
}

// A leader that steps down (SIGTERM) hands the Lease on at once and
// serves on as a follower: a change it is sent waits for the next leader.
func TestStepDownHandsTheLeaseOn(t *testing.T) {
	deps := testDeps(t)
	el := newFakeLeadership(true)
	srv := openReplica(t, deps, el, 300*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for !srv.leading.Load() {
		if time.Now().After(deadline) {
			t.Fatal("not leading")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if res, body := call(t, "POST", srv.URL()+"/sandboxes", map[string]any{"templateID": "base"}, nil); res.StatusCode != 201 {
		t.Fatalf("create on the leader: %d %v", res.StatusCode, body)
	}
	srv.StepDown()
	if srv.leading.Load() || el.leads {
		t.Fatal("still leading, or the Lease not released, after StepDown")
	}
	if res, _ := call(t, "POST", srv.URL()+"/sandboxes", map[string]any{"templateID": "base"}, nil); res.StatusCode != 503 || res.Header.Get("Retry-After") == "" {
		t.Fatalf("create after stepping down, no leader elected: %d, want 503 with Retry-After", res.StatusCode)
	}
	if res, _ := call(t, "GET", srv.URL()+"/sandboxes", nil, nil); res.StatusCode != 200 {
		t.Fatalf("list after stepping down: %d", res.StatusCode)
	}
}

// A stepping-down leader lets the changes it serves finish before it
// hands on, up to settleLimit.
func TestSettleWaitsForChangesInFlight(t *testing.T) {
	rp := newReplicas(newFakeLeadership(true), "s", "localhost", nil, new(atomic.Bool), nil)
	rp.serving.Add(1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rp.settle()
	}()
	select {
	case <-done:
		t.Fatal("settle returned with a change in flight")
	case <-time.After(100 * time.Millisecond):
	}
	rp.serving.Add(-1)
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("settle did not return once the change finished")
	}
}

// A replica whose pod was force-deleted refuses, once it drains, the
// clients' calls that need the leader with 429 and Retry-After, having
// done nothing (E2B's SDK sends them again, to another replica); it
// serves reads, and the calls another replica forwards it. One stopped
// with its grace period forwards as before.
func TestForcedReplicaRefusesChanges(t *testing.T) {
	deps := testDeps(t)
	leader := openReplica(t, deps, newFakeLeadership(true), time.Second)
	u, _ := url.Parse(leader.URL())
	forced, graceful := newFakeLeadership(false), newFakeLeadership(false)
	forced.forced = true
	doomed := openReplica(t, deps, forced, 5*time.Second)
	stopping := openReplica(t, deps, graceful, 5*time.Second)
	forced.setLeader(u.Host)
	graceful.setLeader(u.Host)
	containers := func() int { return len(deps.Runtime.(*fake.Runtime).Containers()) }

	if res, body := call(t, "POST", doomed.URL()+"/sandboxes", map[string]any{"templateID": "base"}, nil); res.StatusCode != 201 {
		t.Fatalf("create before the signal: %d %v", res.StatusCode, body)
	}
	doomed.Drain()
	stopping.Drain()
	for deadline := time.Now().Add(5 * time.Second); !doomed.rp.forced.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the force-deleted replica does not know it")
		}
	}
	res, body := call(t, "POST", doomed.URL()+"/sandboxes", map[string]any{"templateID": "base"}, nil)
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "1" || body["code"] != float64(429) {
		t.Fatalf("create on the force-deleted replica: %d Retry-After=%q %v; want 429 with Retry-After: 1", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if n := containers(); n != 1 {
		t.Fatalf("%d containers after the refused create, want 1", n)
	}
	if res, _ = call(t, "GET", doomed.URL()+"/sandboxes", nil, nil); res.StatusCode != 200 {
		t.Fatalf("list on the force-deleted replica: %d", res.StatusCode)
	}
	proof := map[string]string{headerForwarded: forwardProof("a secret the replicas share")}
	if res, _ = call(t, "POST", doomed.URL()+"/sandboxes", map[string]any{"templateID": "base"}, proof); res.StatusCode == 429 || res.Header.Get(headerNotLeader) == "" {
		t.Fatalf("a forwarded call on the force-deleted replica: %d %v, want its not-leader answer", res.StatusCode, res.Header)
	}
	if res, body = call(t, "POST", stopping.URL()+"/sandboxes", map[string]any{"templateID": "base"}, nil); res.StatusCode != 201 {
		t.Fatalf("create on a replica stopped with its grace period: %d %v", res.StatusCode, body)
	}
	if n := containers(); n != 2 {
		t.Fatalf("%d containers, want 2", n)
	}
}

// A force-deleted replica leaves its idle connections open as it drains
// (closing one cuts the call its client sends on it at that moment): a
// create sent on one is refused with 429, and the answer closes it.
func TestForcedReplicaKeepsIdleConnections(t *testing.T) {
	deps := testDeps(t)
	leader := openReplica(t, deps, newFakeLeadership(true), time.Second)
	el := newFakeLeadership(false)
	el.forced = true
	doomed := openReplica(t, deps, el, 5*time.Second)
	u, _ := url.Parse(leader.URL())
	el.setLeader(u.Host)
	doomed.drainIdle = 5 * time.Microsecond // were idle connections closed, this one would be at once
	c, err := net.Dial("tcp", strings.TrimPrefix(doomed.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	send := func(req string) *http.Response {
		t.Helper()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatalf("sending on the idle connection: %v", err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("reading on the idle connection: %v", err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	doomed.Drain()
	for deadline := time.Now().Add(5 * time.Second); !doomed.rp.forced.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the force-deleted replica does not know it")
		}
	}
	body := `{"templateID":"base"}`
	res := send(fmt.Sprintf("POST /sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", replicaKey, len(body), body))
	if res.StatusCode != 429 || !res.Close {
		t.Fatalf("a create on the idle connection: %d, closing it %v; want 429 closing it", res.StatusCode, res.Close)
	}
}
