package api

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestVolumes(t *testing.T) {
	a := newAPI(t)
	r := a.do(t, "POST", "/volumes", map[string]any{"name": "work"})
	var created map[string]any
	wantAnswer(t, "create", r, http.StatusCreated, "")
	r.decode(t, &created)
	id, _ := created["volumeID"].(string)
	if id == "" || created["name"] != "work" || created["token"] == "" || created["domain"] != nil {
		t.Fatalf("create: %s, want {volumeID, name, token} without domain", r.body)
	}

	for _, tt := range []struct {
		name   string
		key    string
		method string
		path   string
		body   any
		status int
		msg    string
	}{
		{"duplicate name", a.key, "POST", "/volumes", map[string]any{"name": "work"}, http.StatusConflict, "already exists"},
		{"bad name", a.key, "POST", "/volumes", map[string]any{"name": "a/b"}, http.StatusBadRequest, "invalid volume name"},
		{"empty name", a.key, "POST", "/volumes", map[string]any{"name": ""}, http.StatusBadRequest, "invalid volume name"},
		{"no name", a.key, "POST", "/volumes", map[string]any{}, http.StatusBadRequest, "name is required"},
		{"no key", "", "GET", "/volumes", nil, http.StatusUnauthorized, "X-API-KEY"},
		{"another team gets", a.otherKey, "GET", "/volumes/" + id, nil, http.StatusNotFound, "not found"},
		{"another team deletes", a.otherKey, "DELETE", "/volumes/" + id, nil, http.StatusNotFound, "not found"},
		{"unknown", a.key, "GET", "/volumes/vnope", nil, http.StatusNotFound, "not found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantAnswer(t, tt.name, a.doKey(t, tt.key, tt.method, tt.path, tt.body), tt.status, tt.msg)
		})
	}

	var list []map[string]any
	a.doKey(t, a.otherKey, "GET", "/volumes", nil).decode(t, &list)
	if len(list) != 0 {
		t.Errorf("another team lists %v, want none", list)
	}
	a.do(t, "GET", "/volumes", nil).decode(t, &list)
	if diff := cmp.Diff([]map[string]any{{"volumeID": id, "name": "work"}}, list); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	var got map[string]any
	r = a.do(t, "GET", "/volumes/"+id, nil)
	r.decode(t, &got)
	if r.status != http.StatusOK || got["volumeID"] != id || got["name"] != "work" || got["token"] == "" {
		t.Errorf("get: %d %s", r.status, r.body)
	}
	wantAnswer(t, "delete", a.do(t, "DELETE", "/volumes/"+id, nil), http.StatusNoContent, "")
	wantAnswer(t, "get after delete", a.do(t, "GET", "/volumes/"+id, nil), http.StatusNotFound, "not found")
	wantAnswer(t, "delete again", a.do(t, "DELETE", "/volumes/"+id, nil), http.StatusNotFound, "not found")
}

func TestVolumeMounts(t *testing.T) {
	a := newAPI(t)
	var vol map[string]any
	a.do(t, "POST", "/volumes", map[string]any{"name": "ws"}).decode(t, &vol)
	a.doKey(t, a.otherKey, "POST", "/volumes", map[string]any{"name": "theirs"})
	mount := func(name, path string) map[string]any {
		return map[string]any{"templateID": "base", "volumeMounts": []map[string]any{{"name": name, "path": path}}}
	}
	for _, tt := range []struct {
		name string
		body map[string]any
		msg  string
	}{
		{"unknown volume", mount("nope", "/mnt/x"), "volume 'nope' not found"},
		{"another team's volume", mount("theirs", "/mnt/x"), "volume 'theirs' not found"},
		{"relative path", mount("ws", "mnt/x"), "absolute"},
		{"unclean path", mount("ws", "/mnt/../x"), "clean"},
		{"root", mount("ws", "/"), "mounted at /"},
		{"proc", mount("ws", "/proc/x"), "system directory"},
		{"dev", mount("ws", "/dev"), "system directory"},
		{"twice", map[string]any{"templateID": "base", "volumeMounts": []map[string]any{{"name": "ws", "path": "/a"}, {"name": "ws", "path": "/a"}}}, "twice"},
		{"overlap", map[string]any{"templateID": "base", "volumeMounts": []map[string]any{{"name": "ws", "path": "/a"}, {"name": "ws", "path": "/a/b"}}}, "overlap"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantAnswer(t, tt.name, a.do(t, "POST", "/v2/sandboxes", tt.body), http.StatusBadRequest, tt.msg)
		})
	}
	if n := len(a.rt.Containers()); n != 0 {
		t.Errorf("%d containers after refused creates, want 0", n)
	}

	sb := a.create(t, mount("ws", "/mnt/ws"))
	want := []any{map[string]any{"name": "ws", "path": "/mnt/ws"}}
	id := sb["sandboxID"].(string)
	var got map[string]any
	a.do(t, "GET", "/sandboxes/"+id, nil).decode(t, &got)
	if diff := cmp.Diff(want, got["volumeMounts"]); diff != "" {
		t.Errorf("get's volumeMounts (-want +got):\n%s", diff)
	}
	var list []map[string]any
	a.do(t, "GET", "/v2/sandboxes", nil).decode(t, &list)
	if len(list) != 1 || cmp.Diff(want, list[0]["volumeMounts"]) != "" {
		t.Errorf("list: %v, want the sandbox with its volumeMounts", list)
	}
	info, _ := a.m.Get(context.Background(), "default", id)
	ms := a.rt.MountsOf(info.ContainerID)
	if len(ms) != 1 || ms[0].Target != "/mnt/ws" || !strings.HasSuffix(ms[0].Source, "/"+vol["volumeID"].(string)) {
		t.Errorf("container mounts %v, want the volume's dir at /mnt/ws", ms)
	}
	// A fork mounts the same volume (a snapshot holds none of it).
	r := a.do(t, "POST", "/sandboxes/"+id+"/fork", map[string]any{"count": 1, "timeout": 60})
	var forks []struct {
		Sandbox *struct {
			SandboxID string `json:"sandboxID"`
		} `json:"sandbox"`
	}
	r.decode(t, &forks)
	if r.status != http.StatusCreated || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("fork: %d %s", r.status, r.body)
	}
	forkID := forks[0].Sandbox.SandboxID
	a.do(t, "GET", "/sandboxes/"+forkID, nil).decode(t, &got)
	if diff := cmp.Diff(want, got["volumeMounts"]); diff != "" {
		t.Errorf("fork's volumeMounts (-want +got):\n%s", diff)
	}
	fi, _ := a.m.Get(context.Background(), "default", forkID)
	if fm := a.rt.MountsOf(fi.ContainerID); len(fm) != 1 || fm[0] != ms[0] {
		t.Errorf("fork's container mounts %v, want %v", fm, ms)
	}
	a.do(t, "DELETE", "/sandboxes/"+forkID, nil)
	wantAnswer(t, "delete a mounted volume", a.do(t, "DELETE", "/volumes/"+vol["volumeID"].(string), nil), http.StatusConflict, "is mounted by sandbox")
	a.do(t, "DELETE", "/sandboxes/"+id, nil)
	wantAnswer(t, "delete after the kill", a.do(t, "DELETE", "/volumes/"+vol["volumeID"].(string), nil), http.StatusNoContent, "")
}
