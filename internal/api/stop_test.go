package api

import (
	"net/http"
	"testing"
)

// POST /sandboxes/{id}/stop (Warren's own) moves a sandbox to disk and
// says in which mode; listings and details show pauseMode while paused.
func TestStopAndPauseMode(t *testing.T) {
	a := newAPI(t)
	id := a.create(t, map[string]any{"templateID": "base"})["sandboxID"].(string)
	p := "/sandboxes/" + id

	var got map[string]any
	a.do(t, "GET", p, nil).decode(t, &got)
	if _, ok := got["pauseMode"]; ok {
		t.Errorf("a running sandbox has pauseMode %v", got["pauseMode"])
	}
	if r := a.do(t, "POST", p+"/pause", nil); r.status != http.StatusNoContent {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	a.do(t, "GET", p, nil).decode(t, &got)
	if got["state"] != "paused" || got["pauseMode"] != "frozen" {
		t.Errorf("after pause: state %v, pauseMode %v; want paused, frozen", got["state"], got["pauseMode"])
	}
	r := a.do(t, "POST", p+"/stop", nil)
	if r.status != http.StatusOK {
		t.Fatalf("stop: %d %s", r.status, r.body)
	}
	r.decode(t, &got)
	if got["pauseMode"] != "stopped" {
		t.Errorf("stop answered %s, want pauseMode stopped (runc)", r.body)
	}
	var list []map[string]any
	a.do(t, "GET", "/v2/sandboxes?state=paused", nil).decode(t, &list)
	if len(list) != 1 || list[0]["pauseMode"] != "stopped" {
		t.Errorf("list: %v", list)
	}
	wantError(t, "stop of an unknown sandbox", a.do(t, "POST", "/sandboxes/nonexisting/stop", nil), http.StatusNotFound)
	wantError(t, "stop by another team", a.doKey(t, a.otherKey, "POST", p+"/stop", nil), http.StatusNotFound)
}
