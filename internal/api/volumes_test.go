package api

import (
	"net/http"
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
