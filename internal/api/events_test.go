package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestEventsAPI(t *testing.T) {
	a := newAPI(t)
	id := a.create(t, map[string]any{"templateID": "base", "metadata": map[string]string{"k": "v"}})["sandboxID"].(string)
	if r := a.do(t, "POST", "/sandboxes/"+id+"/timeout", map[string]any{"timeout": 120}); r.status != http.StatusNoContent {
		t.Fatalf("timeout: %d %s", r.status, r.body)
	}
	if r := a.do(t, "DELETE", "/sandboxes/"+id, nil); r.status != http.StatusNoContent {
		t.Fatalf("kill: %d %s", r.status, r.body)
	}
	type event struct {
		Version, ID, Type, SandboxID, SandboxTeamID, SandboxTemplateID, SandboxExecutionID string
		EventData                                                                          map[string]any
		Timestamp                                                                          time.Time
	}
	list := func(key, path string) []event {
		t.Helper()
		r := a.doKey(t, key, "GET", path, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		var evs []event
		r.decode(t, &evs)
		return evs
	}
	evs := list(a.key, "/events/sandboxes/"+id)
	if len(evs) != 3 || evs[0].Type != "sandbox.lifecycle.killed" || evs[2].Type != "sandbox.lifecycle.created" {
		t.Fatalf("events of the sandbox, newest first: %+v", evs)
	}
	up := evs[1]
	if up.Type != "sandbox.lifecycle.updated" || up.EventData["set_timeout"] == nil || up.Version != "v1" || up.SandboxID != id ||
		up.SandboxTemplateID != "base" || up.SandboxTeamID == "" || up.SandboxExecutionID == "" || up.Timestamp.IsZero() {
		t.Errorf("update event %+v", up)
	}
	if md, _ := up.EventData["sandbox_metadata"].(map[string]any); md["k"] != "v" {
		t.Errorf("sandbox_metadata %v", up.EventData)
	}
	if asc := list(a.key, "/events/sandboxes/"+id+"?orderAsc=true&limit=1&offset=1"); len(asc) != 1 || asc[0].Type != "sandbox.lifecycle.updated" {
		t.Errorf("orderAsc, limit, offset: %+v", asc)
	}
	if team := list(a.key, "/events/sandboxes"); len(team) != 3 {
		t.Errorf("team events: %d, want 3", len(team))
	}
	if other := list(a.otherKey, "/events/sandboxes/"+id); len(other) != 0 {
		t.Errorf("another team sees %d events of the sandbox", len(other))
	}
	if other := list(a.otherKey, "/events/sandboxes"); len(other) != 0 {
		t.Errorf("another team sees %d events", len(other))
	}
	for _, tc := range []struct{ what, path string }{
		{"limit 0", "/events/sandboxes?limit=0"},
		{"limit 101", "/events/sandboxes?limit=101"},
		{"negative offset", "/events/sandboxes?offset=-1"},
		{"orderAsc junk", "/events/sandboxes?orderAsc=maybe"},
		{"bad sandbox ID", "/events/sandboxes/NOT%20AN%20ID"},
	} {
		wantError(t, tc.what, a.do(t, "GET", tc.path, nil), http.StatusBadRequest)
	}
}

func TestWebhooksAPI(t *testing.T) {
	a := newAPI(t)
	got := make(chan string, 10)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct{ Type string }
		json.NewDecoder(r.Body).Decode(&ev)
		got <- ev.Type
	}))
	defer rcv.Close()

	r := a.do(t, "POST", "/events/webhooks", map[string]any{"name": "mine", "url": rcv.URL, "enabled": true,
		"events": []string{"sandbox.lifecycle.created"}, "signatureSecret": "s3cret"})
	if r.status != http.StatusCreated || strings.Contains(string(r.body), "s3cret") {
		t.Fatalf("create webhook: %d %s", r.status, r.body)
	}
	var w webhookJSON
	r.decode(t, &w)
	if w.ID == "" || w.Name != "mine" || w.URL != rcv.URL || !w.Enabled || len(w.Events) != 1 || w.TeamID == "" {
		t.Errorf("webhook %+v", w)
	}
	a.create(t, map[string]any{"templateID": "base"})
	select {
	case typ := <-got:
		if typ != "sandbox.lifecycle.created" {
			t.Errorf("delivered %s", typ)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery of the created event")
	}

	p := "/events/webhooks/" + w.ID
	if r := a.do(t, "GET", "/events/webhooks", nil); r.status != http.StatusOK || !strings.Contains(string(r.body), w.ID) || strings.Contains(string(r.body), "s3cret") {
		t.Errorf("list: %d %s", r.status, r.body)
	}
	r = a.do(t, "PATCH", p, map[string]any{"enabled": false, "events": []string{"sandbox.lifecycle.killed", "sandbox.lifecycle.paused"}})
	r.decode(t, &w)
	if r.status != http.StatusOK || w.Enabled || len(w.Events) != 2 || w.Name != "mine" {
		t.Errorf("patch: %d %s", r.status, r.body)
	}
	// The receiver has the event before the delivery is recorded as done.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := a.do(t, "GET", p+"/deliveries", nil)
		if r.status == http.StatusOK && strings.Contains(string(r.body), `"status":"delivered"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries: %d %s", r.status, r.body)
		}
	}
	for _, tc := range []struct {
		what   string
		method string
		path   string
		body   any
		status int
	}{
		{"no body", "POST", "/events/webhooks", nil, 400},
		{"no url", "POST", "/events/webhooks", map[string]any{"signatureSecret": "k"}, 400},
		{"no secret", "POST", "/events/webhooks", map[string]any{"url": rcv.URL}, 400},
		{"bad url", "POST", "/events/webhooks", map[string]any{"url": "javascript:alert(1)", "signatureSecret": "k"}, 400},
		{"unknown event", "POST", "/events/webhooks", map[string]any{"url": rcv.URL, "signatureSecret": "k", "events": []string{"x"}}, 400},
		{"events not a list", "POST", "/events/webhooks", `{"url": "http://127.0.0.1/", "signatureSecret": "k", "events": "all"}`, 400},
		{"unknown webhook", "GET", "/events/webhooks/nope", nil, 404},
		{"patch unknown", "PATCH", "/events/webhooks/nope", map[string]any{"enabled": true}, 404},
		{"patch bad url", "PATCH", p, map[string]any{"url": "ftp://x"}, 400},
		{"delete unknown", "DELETE", "/events/webhooks/nope", nil, 404},
	} {
		wantError(t, tc.what, a.do(t, tc.method, tc.path, tc.body), tc.status)
	}
	for _, method := range []string{"GET", "PATCH", "DELETE"} {
		wantError(t, "another team's "+method, a.doKey(t, a.otherKey, method, p, map[string]any{"enabled": true}), 404)
	}
	if r := a.do(t, "DELETE", p, nil); r.status != http.StatusOK {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	wantError(t, "deleted", a.do(t, "GET", p, nil), 404)
}

func TestTeamsAPI(t *testing.T) {
	a := newAPI(t)
	r := a.do(t, "GET", "/teams", nil)
	var teams []teamJSON
	r.decode(t, &teams)
	if r.status != http.StatusOK || len(teams) != 1 || teams[0].TeamID == "" || !teams[0].IsDefault {
		t.Fatalf("teams: %d %s", r.status, r.body)
	}
	team := teams[0].TeamID
	a.create(t, map[string]any{"templateID": "base"})
	a.create(t, map[string]any{"templateID": "base"})
	now := time.Now().Unix()
	q := func(path string) string {
		return path + "?start=" + strconv.FormatInt(now-60, 10) + "&end=" + strconv.FormatInt(now+5, 10)
	}
	r = a.do(t, "GET", q("/teams/"+team+"/metrics"), nil)
	var ms []teamMetricJSON
	r.decode(t, &ms)
	if r.status != http.StatusOK || len(ms) == 0 || ms[len(ms)-1].ConcurrentSandboxes != 2 {
		t.Fatalf("metrics: %d %s", r.status, r.body)
	}
	r = a.do(t, "GET", q("/teams/"+team+"/metrics/max")+"&metric=concurrent_sandboxes", nil)
	var mx maxTeamMetricJSON
	r.decode(t, &mx)
	if r.status != http.StatusOK || mx.Value != 2 || mx.TimestampUnix == 0 {
		t.Errorf("max: %d %s", r.status, r.body)
	}
	wantError(t, "another team's metrics", a.doKey(t, a.otherKey, "GET", "/teams/"+team+"/metrics", nil), http.StatusForbidden)
	wantError(t, "no metric", a.do(t, "GET", "/teams/"+team+"/metrics/max", nil), http.StatusBadRequest)
	wantError(t, "end before start", a.do(t, "GET", "/teams/"+team+"/metrics?start=100&end=50", nil), http.StatusBadRequest)
	wantError(t, "bad start", a.do(t, "GET", "/teams/"+team+"/metrics?start=soon", nil), http.StatusBadRequest)
}
