package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/sandbox"
)

func event(id, team, sandboxID string, at time.Time) sandbox.Event {
	return sandbox.Event{ID: id, Type: sandbox.EventCreated, Time: at, SandboxID: sandboxID, TeamID: team,
		TemplateID: "base", ExecutionID: "x" + id, Data: map[string]any{"k": "v"}}
}

func delivery(id, webhook string, ev sandbox.Event, status sandbox.DeliveryStatus, next time.Time) sandbox.Delivery {
	return sandbox.Delivery{ID: id, WebhookID: webhook, EventID: ev.ID, SandboxID: ev.SandboxID, Status: status,
		NextAttempt: next, CreatedAt: ev.Time}
}

func eventIDs(evs []sandbox.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.ID)
	}
	return out
}

func testEvents(t *testing.T, s Store) {
	ctx := t.Context()
	for i := range 5 {
		sb := "i1"
		if i%2 == 1 {
			sb = "i2"
		}
		if err := s.AddEvent(ctx, event(fmt.Sprintf("e%d", i), "t1", sb, t0.Add(time.Duration(i)*time.Second)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddEvent(ctx, event("other", "t2", "i9", t0), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEvent(ctx, event("e0", "t1", "i1", t0), nil); err == nil {
		t.Error("a second event of one ID was stored")
	}
	want := event("e2", "t1", "i1", t0.Add(2*time.Second))
	if got, err := s.GetEvent(ctx, "e2"); err != nil || !cmp.Equal(got, want) {
		t.Errorf("GetEvent = %+v, %v; want %+v", got, err, want)
	}
	if _, err := s.GetEvent(ctx, "nope"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("an unknown event: %v, want not found", err)
	}
	for _, tt := range []struct {
		name string
		q    events.Query
		want []string
	}{
		{"newest first", events.Query{TeamID: "t1"}, []string{"e4", "e3", "e2", "e1", "e0"}},
		{"oldest first", events.Query{TeamID: "t1", Ascending: true}, []string{"e0", "e1", "e2", "e3", "e4"}},
		{"a page", events.Query{TeamID: "t1", Offset: 1, Limit: 2}, []string{"e3", "e2"}},
		{"a sandbox", events.Query{TeamID: "t1", SandboxID: "i2"}, []string{"e3", "e1"}},
		{"before", events.Query{TeamID: "t1", Before: t0.Add(2 * time.Second), Ascending: true}, []string{"e0", "e1"}},
		{"another team", events.Query{TeamID: "t2"}, []string{"other"}},
	} {
		got, err := s.Events(ctx, tt.q)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, eventIDs(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func testWebhooks(t *testing.T, s Store) {
	ctx := t.Context()
	a := events.Webhook{ID: "w1", TeamID: "t1", Name: "a", URL: "http://127.0.0.1:1/a", Enabled: true,
		Events: []sandbox.EventType{sandbox.EventCreated}, Secret: "s", CreatedAt: t0, UpdatedAt: t0}
	b := events.Webhook{ID: "w2", TeamID: "t2", Name: "b", URL: "http://127.0.0.1:1/b",
		Events: []sandbox.EventType{sandbox.EventKilled}, CreatedAt: t0.Add(time.Second), UpdatedAt: t0}
	for _, w := range []events.Webhook{a, b} {
		if err := s.PutWebhook(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	a.Enabled = false
	if err := s.PutWebhook(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetWebhook(ctx, "w1"); err != nil || !cmp.Equal(got, a) {
		t.Errorf("GetWebhook = %+v, %v; want %+v", got, err, a)
	}
	if got, _ := s.ListWebhooks(ctx, ""); !cmp.Equal(got, []events.Webhook{a, b}) {
		t.Errorf("ListWebhooks(all) = %+v", got)
	}
	if got, _ := s.ListWebhooks(ctx, "t2"); !cmp.Equal(got, []events.Webhook{b}) {
		t.Errorf("ListWebhooks(t2) = %+v", got)
	}
	ev := event("e1", "t1", "i1", t0)
	if err := s.AddEvent(ctx, ev, []sandbox.Delivery{delivery("d1", "w1", ev, sandbox.DeliveryPending, t0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWebhook(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetWebhook(ctx, "w1"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("a deleted webhook: %v, want not found", err)
	}
	if ds, _ := s.Deliveries(ctx, "w1", 10); len(ds) != 0 {
		t.Errorf("deliveries outlived their webhook: %+v", ds)
	}
	if due, _ := s.DueDeliveries(ctx, t0.Add(time.Hour), 10); len(due) != 0 {
		t.Errorf("deliveries of a deleted webhook are due: %+v", due)
	}
}

// An event's deliveries are stored with it; per webhook and sandbox the
// oldest pending one goes first, and a later one waits for it; at most
// perWebhook of one webhook are due at once.
func testDeliveries(t *testing.T, s Store) {
	ctx := t.Context()
	e1, e2, e3 := event("e1", "t1", "i1", t0), event("e2", "t1", "i1", t0.Add(time.Second)), event("e3", "t1", "i2", t0.Add(2*time.Second))
	d1 := delivery("d1", "w1", e1, sandbox.DeliveryPending, t0.Add(time.Minute))
	d2 := delivery("d2", "w1", e2, sandbox.DeliveryPending, t0)
	d3 := delivery("d3", "w1", e3, sandbox.DeliveryPending, t0)
	d4 := delivery("d4", "w2", e1, sandbox.DeliveryPending, t0)
	for _, add := range []struct {
		ev sandbox.Event
		ds []sandbox.Delivery
	}{{e1, []sandbox.Delivery{d1, d4}}, {e2, []sandbox.Delivery{d2}}, {e3, []sandbox.Delivery{d3}}} {
		if err := s.AddEvent(ctx, add.ev, add.ds); err != nil {
			t.Fatal(err)
		}
	}
	due := func(now time.Time, perWebhook int) []string {
		ds, err := s.DueDeliveries(ctx, now, perWebhook)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}
	// d2 waits for d1, its sandbox's earlier event, which is not due yet.
	if diff := cmp.Diff([]string{"d4", "d3"}, due(t0, 10)); diff != "" {
		t.Errorf("due at t0 (-want +got):\n%s", diff)
	}
	// w1 has d1 and d3 due: one of them, the oldest, with w2's d4.
	if diff := cmp.Diff([]string{"d1", "d4"}, due(t0.Add(time.Minute), 1)); diff != "" {
		t.Errorf("due later, one a webhook (-want +got):\n%s", diff)
	}
	d1.Status, d1.Attempts, d1.LastStatus, d1.DeliveredAt = sandbox.DeliveryDelivered, 1, 200, t0.Add(time.Minute)
	if err := s.PutDelivery(ctx, d1); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"d4", "d2", "d3"}, due(t0.Add(time.Minute), 10)); diff != "" {
		t.Errorf("due after d1 (-want +got):\n%s", diff)
	}
	got, err := s.Deliveries(ctx, "w1", 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]sandbox.Delivery{d3, d2}, got); diff != "" {
		t.Errorf("newest deliveries of w1 (-want +got):\n%s", diff)
	}
	if got, _ := s.Deliveries(ctx, "w1", 10); len(got) != 3 || !cmp.Equal(got[2], d1) {
		t.Errorf("deliveries of w1 = %+v, want d1 last, as updated", got)
	}
}

// A sandbox's change and the events that tell of it, with their
// deliveries, are stored together or not at all: a write whose event is
// refused (its ID taken) leaves the sandbox as it was and stores none of
// its deliveries. Its events keep the order of the sandbox's writes.
func testSandboxWithEvents(t *testing.T, s Store) {
	ctx := t.Context()
	sb := sandbox.Sandbox{ID: "i1", TeamID: "t1", TemplateID: "base", State: sandbox.StateRunning, StartedAt: t0}
	created := event("e1", "t1", "i1", t0)
	d1 := delivery("d1", "w1", created, sandbox.DeliveryPending, t0)
	if err := s.PutSandbox(ctx, sb, sandbox.Recorded{Event: created, Deliveries: []sandbox.Delivery{d1}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetSandbox(ctx, "i1"); err != nil || got.State != sandbox.StateRunning {
		t.Errorf("the sandbox written with its event = %+v, %v", got, err)
	}
	if got, err := s.GetEvent(ctx, "e1"); err != nil || !cmp.Equal(got, created) {
		t.Errorf("the event written with its sandbox = %+v, %v; want %+v", got, err, created)
	}
	if got, err := s.Deliveries(ctx, "w1", 10); err != nil || !cmp.Equal(got, []sandbox.Delivery{d1}) {
		t.Errorf("the deliveries written with their sandbox = %+v, %v; want d1", got, err)
	}

	paused := sb
	paused.State, paused.PauseMode = sandbox.StatePaused, sandbox.PauseFrozen
	taken := event("e1", "t1", "i1", t0.Add(time.Second))
	taken.Type = sandbox.EventPaused
	d2 := delivery("d2", "w1", taken, sandbox.DeliveryPending, t0)
	if err := s.PutSandbox(ctx, paused, sandbox.Recorded{Event: taken, Deliveries: []sandbox.Delivery{d2}}); err == nil {
		t.Fatal("a change was stored with an event whose ID is taken")
	}
	other := sandbox.Sandbox{ID: "i2", TeamID: "t1", State: sandbox.StateRunning, StartedAt: t0}
	d3 := delivery("d3", "w1", event("e1", "t1", "i2", t0), sandbox.DeliveryPending, t0)
	if err := s.PutSandbox(ctx, other, sandbox.Recorded{Event: event("e1", "t1", "i2", t0), Deliveries: []sandbox.Delivery{d3}}); err == nil {
		t.Fatal("a new sandbox was stored with an event whose ID is taken")
	}
	if got, err := s.GetSandbox(ctx, "i1"); err != nil || got.State != sandbox.StateRunning {
		t.Errorf("after a change whose event was refused the sandbox is %+v, %v; want it running, as it was", got, err)
	}
	if _, err := s.GetSandbox(ctx, "i2"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("a new sandbox whose event was refused: %v, want not found", err)
	}
	if got, err := s.Deliveries(ctx, "w1", 10); err != nil || !cmp.Equal(got, []sandbox.Delivery{d1}) {
		t.Errorf("after the refused writes the deliveries are %+v, %v; want d1 alone", got, err)
	}

	// Writes with and without a change, one after the other, keep their order.
	if err := s.AddEvent(ctx, event("e2", "t1", "i1", t0), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSandbox(ctx, paused, sandbox.Recorded{Event: event("e3", "t1", "i1", t0)}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, events.Query{TeamID: "t1", SandboxID: "i1", Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"e1", "e2", "e3"}, eventIDs(evs)); diff != "" {
		t.Errorf("events of i1 in order (-want +got):\n%s", diff)
	}
}

// Old events go with their finished deliveries; a pending delivery
// keeps its event.
func testEventRetention(t *testing.T, s Store) {
	ctx := t.Context()
	old, kept, recent := event("old", "t1", "i1", t0), event("kept", "t1", "i1", t0.Add(time.Second)), event("new", "t1", "i1", t0.Add(time.Hour))
	if err := s.AddEvent(ctx, old, []sandbox.Delivery{delivery("d-old", "w1", old, sandbox.DeliveryDelivered, t0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEvent(ctx, kept, []sandbox.Delivery{delivery("d-kept", "w1", kept, sandbox.DeliveryPending, t0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEvent(ctx, recent, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEventsBefore(ctx, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Events(ctx, events.Query{TeamID: "t1", Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"kept", "new"}, eventIDs(got)); diff != "" {
		t.Errorf("events left (-want +got):\n%s", diff)
	}
	ds, _ := s.Deliveries(ctx, "w1", 10)
	if len(ds) != 1 || ds[0].ID != "d-kept" {
		t.Errorf("deliveries left = %+v, want the pending one", ds)
	}
}
