package events_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

// receiver is a webhook endpoint that records what it gets and fails the
// first failFirst requests.
type receiver struct {
	srv *httptest.Server

	mu        sync.Mutex // guards the fields below
	failFirst int
	got       []delivery
	calls     int
}

type delivery struct {
	header http.Header
	body   []byte
	event  events.JSON
}

func newReceiver(t *testing.T, failFirst int) *receiver {
	rc := &receiver{failFirst: failFirst}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.calls++
		if rc.calls <= rc.failFirst {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var ev events.JSON
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("delivery body is not an event: %v: %s", err, body)
		}
		rc.got = append(rc.got, delivery{header: r.Header.Clone(), body: body, event: ev})
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func openStore(t *testing.T, path string) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newService(t *testing.T, db *sqlite.DB) *events.Service {
	t.Helper()
	s := events.New(events.Config{Store: db, AllowPrivate: true, Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxAttempts: 4})
	s.Start(context.Background())
	t.Cleanup(s.Close)
	return s
}

func ptr[T any](v T) *T { return &v }

func hook(t *testing.T, s *events.Service, team, url string, types ...sandbox.EventType) events.Webhook {
	t.Helper()
	w, err := s.CreateWebhook(context.Background(), team, events.WebhookSpec{URL: ptr(url), Secret: ptr("s3cret"), Events: types})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func event(team, id string, typ sandbox.EventType) sandbox.Event {
	return sandbox.Event{Type: typ, SandboxID: id, TeamID: team, TemplateID: "base", ExecutionID: "x1"}
}

// Each delivery is the event in E2B's shape, signed as E2B's docs say,
// with E2B's headers; only the team's enabled webhooks that take the type
// get it.
func TestDeliverySignedToSubscribers(t *testing.T) {
	db := openStore(t, ":memory:")
	s := newService(t, db)
	ctx := context.Background()
	all := newReceiver(t, 0)
	killedOnly := newReceiver(t, 0)
	disabled := newReceiver(t, 0)
	other := newReceiver(t, 0)
	w := hook(t, s, "team1", all.srv.URL)
	hook(t, s, "team1", killedOnly.srv.URL, sandbox.EventKilled)
	off := hook(t, s, "team1", disabled.srv.URL)
	if _, err := s.UpdateWebhook(ctx, "team1", off.ID, events.WebhookSpec{Enabled: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	hook(t, s, "team2", other.srv.URL)

	s.Record(ctx, event("team1", "isb1", sandbox.EventCreated))
	s.Record(ctx, event("team1", "isb1", sandbox.EventKilled))
	waitFor(t, "two deliveries", func() bool { return len(all.deliveries()) == 2 && len(killedOnly.deliveries()) == 1 })

	got := all.deliveries()
	if got[0].event.Type != string(sandbox.EventCreated) || got[1].event.Type != string(sandbox.EventKilled) {
		t.Errorf("order: %s then %s", got[0].event.Type, got[1].event.Type)
	}
	d := got[0]
	if d.event.Version != "v1" || d.event.SandboxID != "isb1" || d.event.SandboxTeamID != "team1" || d.event.SandboxExecutionID != "x1" || d.event.ID == "" {
		t.Errorf("event: %+v", d.event)
	}
	if got, want := d.header.Get("E2b-Signature"), events.Signature("s3cret", d.body); got != want || got == "" {
		t.Errorf("e2b-signature %q, want %q", got, want)
	}
	if d.header.Get("E2b-Webhook-Id") != w.ID || d.header.Get("E2b-Signature-Version") != "v1" || d.header.Get("E2b-Delivery-Id") == "" {
		t.Errorf("headers: %v", d.header)
	}
	if killedOnly.deliveries()[0].event.Type != string(sandbox.EventKilled) {
		t.Errorf("a webhook of killed events got %s", killedOnly.deliveries()[0].event.Type)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(disabled.deliveries()) + len(other.deliveries()); n != 0 {
		t.Errorf("a disabled webhook or another team's got %d deliveries", n)
	}
}

// Prepare writes nothing: the event, with a delivery to each webhook of
// its team that takes its type, is stored by its caller with the change it
// tells of, and delivered once Stored says so.
func TestPreparedEventStoredWithItsChange(t *testing.T) {
	db := openStore(t, ":memory:")
	s := newService(t, db)
	ctx := context.Background()
	rc := newReceiver(t, 0)
	w := hook(t, s, "team1", rc.srv.URL, sandbox.EventCreated)
	hook(t, s, "team1", rc.srv.URL, sandbox.EventKilled)
	rec := s.Prepare(ctx, event("team1", "isb1", sandbox.EventCreated))
	if rec.Event.ID == "" || rec.Event.Time.IsZero() || len(rec.Deliveries) != 1 || rec.Deliveries[0].WebhookID != w.ID ||
		rec.Deliveries[0].EventID != rec.Event.ID || rec.Deliveries[0].Status != sandbox.DeliveryPending {
		t.Fatalf("prepared %+v, want the event with one pending delivery, to %s", rec, w.ID)
	}
	if evs, err := s.Events(ctx, events.Query{TeamID: "team1"}); err != nil || len(evs) != 0 {
		t.Fatalf("after Prepare the store holds events %v, %v; want none", evs, err)
	}
	sb := sandbox.Sandbox{ID: "isb1", TeamID: "team1", State: sandbox.StateRunning}
	if err := db.PutSandbox(ctx, sb, rec); err != nil {
		t.Fatal(err)
	}
	s.Stored(rec)
	waitFor(t, "the delivery", func() bool { return len(rc.deliveries()) == 1 })
	if got := rc.deliveries()[0].event; got.ID != rec.Event.ID || got.Type != string(sandbox.EventCreated) {
		t.Errorf("delivered %+v, want event %s", got, rec.Event.ID)
	}
}

// E2B's docs verify with sha256(secret + body) in standard base64, then
// '+' → '-', '/' → '_' and no '=' padding.
func TestSignatureIsE2Bs(t *testing.T) {
	for i := range 100 {
		body := []byte(fmt.Sprintf(`{"n":%d}`, i))
		sum := sha256.Sum256(append([]byte("k"), body...))
		want := strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(base64.StdEncoding.EncodeToString(sum[:])), "=")
		if got := events.Signature("k", body); got != want {
			t.Fatalf("Signature of %s = %q, want %q", body, got, want)
		}
	}
}

// A receiver that fails gets the delivery again with backoff, and a
// sandbox's later events wait for its earlier one: they arrive in order.
// After MaxAttempts a delivery fails for good, and the log says so.
func TestRetriesInOrder(t *testing.T) {
	db := openStore(t, ":memory:")
	s := newService(t, db)
	ctx := context.Background()
	rc := newReceiver(t, 2)
	w := hook(t, s, "team1", rc.srv.URL)
	for _, typ := range []sandbox.EventType{sandbox.EventCreated, sandbox.EventPaused, sandbox.EventResumed, sandbox.EventKilled} {
		s.Record(ctx, event("team1", "isb1", typ))
	}
	waitFor(t, "four deliveries", func() bool { return len(rc.deliveries()) == 4 })
	var types []string
	for _, d := range rc.deliveries() {
		types = append(types, d.event.Type)
	}
	want := []string{"sandbox.lifecycle.created", "sandbox.lifecycle.paused", "sandbox.lifecycle.resumed", "sandbox.lifecycle.killed"}
	if !slices.Equal(types, want) {
		t.Errorf("delivered %v, want %v", types, want)
	}
	log, err := s.Deliveries(ctx, "team1", w.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	first := log[len(log)-1]
	if first.Status != sandbox.DeliveryDelivered || first.Attempts != 3 || first.LastStatus != http.StatusNoContent {
		t.Errorf("first delivery: %+v, want delivered on attempt 3", first)
	}

	dead := newReceiver(t, 1000)
	dw := hook(t, s, "team1", dead.srv.URL)
	s.Record(ctx, event("team1", "isb2", sandbox.EventCreated))
	waitFor(t, "the delivery to fail for good", func() bool {
		ds, _ := s.Deliveries(ctx, "team1", dw.ID, 1)
		return len(ds) == 1 && ds[0].Status == sandbox.DeliveryFailed
	})
	ds, _ := s.Deliveries(ctx, "team1", dw.ID, 1)
	if ds[0].Attempts != 4 || ds[0].LastStatus != http.StatusServiceUnavailable || ds[0].LastError == "" {
		t.Errorf("failed delivery: %+v", ds[0])
	}
}

// Deliveries are in the store before Record returns: a service that
// stops before it delivers leaves them to the next one.
func TestNothingLostAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warren.db")
	rc := newReceiver(t, 0)
	ctx := context.Background()
	db := openStore(t, path)
	first := events.New(events.Config{Store: db, AllowPrivate: true}) // never started
	if _, err := first.CreateWebhook(ctx, "team1", events.WebhookSpec{URL: ptr(rc.srv.URL), Secret: ptr("k")}); err != nil {
		t.Fatal(err)
	}
	first.Record(ctx, event("team1", "isb1", sandbox.EventCreated))
	first.Record(ctx, event("team1", "isb1", sandbox.EventKilled))
	db.Close()

	newService(t, openStore(t, path))
	waitFor(t, "the deliveries after the restart", func() bool { return len(rc.deliveries()) == 2 })
}

func TestEventsQuery(t *testing.T) {
	db := openStore(t, ":memory:")
	s := events.New(events.Config{Store: db, AllowPrivate: true})
	ctx := context.Background()
	for _, typ := range []sandbox.EventType{sandbox.EventCreated, sandbox.EventUpdated, sandbox.EventKilled} {
		s.Record(ctx, event("team1", "isb1", typ))
	}
	s.Record(ctx, event("team1", "isb2", sandbox.EventCreated))
	s.Record(ctx, event("team2", "isb3", sandbox.EventCreated))
	for _, tc := range []struct {
		name string
		q    events.Query
		want []string
	}{
		{"team, newest first", events.Query{TeamID: "team1", Limit: 10}, []string{"isb2:created", "isb1:killed", "isb1:updated", "isb1:created"}},
		{"limit and offset", events.Query{TeamID: "team1", Limit: 2, Offset: 1}, []string{"isb1:killed", "isb1:updated"}},
		{"sandbox, oldest first", events.Query{TeamID: "team1", SandboxID: "isb1", Limit: 10, Ascending: true}, []string{"isb1:created", "isb1:updated", "isb1:killed"}},
		{"another team's sandbox", events.Query{TeamID: "team1", SandboxID: "isb3", Limit: 10}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := s.Events(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range evs {
				got = append(got, ev.SandboxID+":"+string(ev.Type)[len("sandbox.lifecycle."):])
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWebhookValidation(t *testing.T) {
	s := events.New(events.Config{Store: openStore(t, ":memory:"), AllowPrivate: true})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		spec events.WebhookSpec
	}{
		{"no url", events.WebhookSpec{Secret: ptr("k")}},
		{"no secret", events.WebhookSpec{URL: ptr("http://127.0.0.1:9/")}},
		{"relative url", events.WebhookSpec{URL: ptr("/hook"), Secret: ptr("k")}},
		{"ftp url", events.WebhookSpec{URL: ptr("ftp://127.0.0.1/"), Secret: ptr("k")}},
		{"credentials in url", events.WebhookSpec{URL: ptr("http://a:b@127.0.0.1/"), Secret: ptr("k")}},
		{"newline in url", events.WebhookSpec{URL: ptr("http://127.0.0.1/\n"), Secret: ptr("k")}},
		{"unknown event", events.WebhookSpec{URL: ptr("http://127.0.0.1/"), Secret: ptr("k"), Events: []sandbox.EventType{"sandbox.lifecycle.exploded"}}},
		{"no events", events.WebhookSpec{URL: ptr("http://127.0.0.1/"), Secret: ptr("k"), Events: []sandbox.EventType{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.CreateWebhook(ctx, "team1", tc.spec); sandbox.KindOf(err) != sandbox.KindInvalid {
				t.Errorf("CreateWebhook = %v, want KindInvalid", err)
			}
		})
	}
	if hooks, _ := s.Webhooks(ctx, "team1"); len(hooks) != 0 {
		t.Errorf("refused webhooks were stored: %v", hooks)
	}
	w, err := s.CreateWebhook(ctx, "team1", events.WebhookSpec{URL: ptr("http://127.0.0.1:9/"), Secret: ptr("k")})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.Events, sandbox.EventTypes) || !w.Enabled || w.Name == "" {
		t.Errorf("defaults: %+v", w)
	}
	for _, err := range []error{
		func() error { _, err := s.Webhook(ctx, "team2", w.ID); return err }(),
		func() error {
			_, err := s.UpdateWebhook(ctx, "team2", w.ID, events.WebhookSpec{Enabled: ptr(false)})
			return err
		}(),
		s.DeleteWebhook(ctx, "team2", w.ID),
	} {
		if sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Errorf("another team's webhook: %v, want KindNotFound", err)
		}
	}
	if _, err := s.UpdateWebhook(ctx, "team1", w.ID, events.WebhookSpec{Secret: ptr("")}); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("empty secret on update: %v", err)
	}
}

// Team metrics count from the events: the most sandboxes running at once
// in each step (paused ones are not running), and creates per second.
func TestTeamMetrics(t *testing.T) {
	db := openStore(t, ":memory:")
	s := events.New(events.Config{Store: db, AllowPrivate: true})
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(sec int, id string, typ sandbox.EventType) {
		ev := event("team1", id, typ)
		ev.Time = t0.Add(time.Duration(sec) * time.Second)
		s.Record(ctx, ev)
	}
	at(-100, "old", sandbox.EventCreated) // before the range: still running in it
	at(1, "a", sandbox.EventCreated)
	at(2, "b", sandbox.EventCreated)
	at(3, "b", sandbox.EventPaused)
	at(6, "c", sandbox.EventCreated)
	at(7, "a", sandbox.EventKilled)
	at(11, "b", sandbox.EventResumed)
	s.Record(ctx, sandbox.Event{Type: sandbox.EventCreated, SandboxID: "x", TeamID: "team2", Time: t0.Add(time.Second)})

	ms, err := s.TeamMetrics(ctx, "team1", t0, t0.Add(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	type point struct {
		sec, concurrent int
		rate            float64
	}
	var got []point
	for _, m := range ms {
		got = append(got, point{int(m.Time.Sub(t0).Seconds()), m.Concurrent, m.StartRate})
	}
	want := []point{{0, 3, 0.4}, {5, 3, 0.2}, {10, 3, 0}}
	if !slices.Equal(got, want) {
		t.Errorf("metrics %v, want %v", got, want)
	}
	if _, err := s.TeamMetrics(ctx, "team1", t0, t0); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("empty range: %v", err)
	}
}
