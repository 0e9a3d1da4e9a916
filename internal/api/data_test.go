package api

import (
	"strconv"
	"testing"
	"time"
)

func TestMetricsLogsSnapshotsFork(t *testing.T) {
	a := newAPI(t)
	id := a.create(t, map[string]any{"templateID": "base"})["sandboxID"].(string)
	p := "/sandboxes/" + id

	r := a.do(t, "GET", p+"/metrics?start=0&end="+strconv.FormatInt(time.Now().Unix()+60, 10), nil)
	if r.status != 200 || string(r.body) != "[]\n" {
		t.Errorf("metrics before any sample: %d %s", r.status, r.body)
	}
	wantError(t, "metrics bad start", a.do(t, "GET", p+"/metrics?start=soon", nil), 400)
	wantError(t, "metrics unknown", a.do(t, "GET", "/sandboxes/nosuch/metrics", nil), 404)
	r = a.do(t, "GET", "/sandboxes/metrics?sandbox_ids="+id, nil)
	if r.status != 200 || string(r.body) != "{\"sandboxes\":{}}\n" {
		t.Errorf("bulk metrics: %d %s", r.status, r.body)
	}

	r = a.do(t, "GET", p+"/logs", nil)
	var v1 struct {
		Logs       []map[string]any `json:"logs"`
		LogEntries []map[string]any `json:"logEntries"`
	}
	r.decode(t, &v1)
	if r.status != 200 || len(v1.Logs) != 1 || v1.LogEntries[0]["message"] != "sandbox created" {
		t.Errorf("logs v1: %d %s", r.status, r.body)
	}
	a.do(t, "POST", p+"/pause", nil)
	r = a.do(t, "GET", "/v2"+p+"/logs?direction=backward&limit=1", nil)
	var v2 struct {
		Logs []map[string]any `json:"logs"`
	}
	r.decode(t, &v2)
	if r.status != 200 || len(v2.Logs) != 1 || v2.Logs[0]["message"] != "sandbox paused" {
		t.Errorf("logs v2 backward: %d %s", r.status, r.body)
	}
	wantError(t, "logs bad direction", a.do(t, "GET", "/v2"+p+"/logs?direction=up", nil), 400)
	a.do(t, "POST", p+"/connect", map[string]any{"timeout": 60})

	// Snapshots: create, use as a template, list, delete.
	r = a.do(t, "POST", p+"/snapshots", map[string]any{})
	var snap struct {
		SnapshotID string   `json:"snapshotID"`
		Names      []string `json:"names"`
	}
	r.decode(t, &snap)
	if r.status != 201 || snap.SnapshotID == "" || snap.Names == nil {
		t.Fatalf("create snapshot: %d %s", r.status, r.body)
	}
	a.do(t, "POST", p+"/snapshots", map[string]any{"name": "named"})
	wantError(t, "snapshot unknown", a.do(t, "POST", "/sandboxes/nosuch/snapshots", map[string]any{}), 404)
	a.create(t, map[string]any{"templateID": snap.SnapshotID})

	var list []map[string]any
	a.do(t, "GET", "/snapshots?sandboxID="+id, nil).decode(t, &list)
	if len(list) != 2 {
		t.Errorf("snapshots of sandbox: %v", list)
	}
	a.do(t, "GET", "/snapshots?name=named", nil).decode(t, &list)
	if len(list) != 1 {
		t.Errorf("snapshots named: %v", list)
	}
	r = a.do(t, "GET", "/snapshots?limit=1", nil)
	if r.header.Get("X-Next-Token") == "" {
		t.Error("snapshot paging: no X-Next-Token")
	}
	r = a.do(t, "GET", "/snapshots?limit=1&nextToken="+r.header.Get("X-Next-Token"), nil)
	if r.status != 200 || r.header.Get("X-Next-Token") != "" {
		t.Errorf("second snapshot page: %d next %q", r.status, r.header.Get("X-Next-Token"))
	}
	if r := a.do(t, "DELETE", "/templates/"+snap.SnapshotID, nil); r.status != 204 {
		t.Errorf("delete snapshot: %d %s", r.status, r.body)
	}
	wantError(t, "delete snapshot again", a.do(t, "DELETE", "/templates/"+snap.SnapshotID, nil), 404)

	// Fork.
	r = a.do(t, "POST", p+"/fork", map[string]any{"count": 2, "timeout": 60})
	var forks []struct {
		Sandbox *struct {
			SandboxID string `json:"sandboxID"`
		} `json:"sandbox"`
		Error *struct{ Code int } `json:"error"`
	}
	r.decode(t, &forks)
	if r.status != 201 || len(forks) != 2 || forks[0].Sandbox == nil || forks[1].Sandbox == nil {
		t.Errorf("fork: %d %s", r.status, r.body)
	}
	wantError(t, "fork count 0", a.do(t, "POST", p+"/fork", map[string]any{"count": 0}), 400)
	wantError(t, "fork count 101", a.do(t, "POST", p+"/fork", map[string]any{"count": 101}), 400)
	wantError(t, "fork unknown", a.do(t, "POST", "/sandboxes/nosuch/fork", nil), 404)
}
