package api

import (
	"net/http"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

// TestTemplateRequestFields: minFreeDiskMb is met or refused, a teamID
// other than the key's is forbidden, fromImageRegistry is refused, the
// build log's source is checked and the builds of a template are paged.
func TestTemplateRequestFields(t *testing.T) {
	a, _ := newTemplateAPI(t)
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
		names  string
	}{
		{"negative minFreeDiskMb", map[string]any{"name": "d1", "minFreeDiskMb": -1}, http.StatusBadRequest, "minFreeDiskMb"},
		{"minFreeDiskMb above the disk", map[string]any{"name": "d2", "minFreeDiskMb": 10241}, http.StatusBadRequest, "--disk-size-mb"},
		{"minFreeDiskMb within the disk", map[string]any{"name": "d3", "minFreeDiskMb": 10240}, http.StatusAccepted, ""},
		{"another team", map[string]any{"name": "d4", "teamID": "other"}, http.StatusForbidden, "teamID 'other'"},
		{"own team", map[string]any{"name": "d5", "teamID": sandbox.DefaultTeamID}, http.StatusAccepted, ""},
	} {
		r := a.do(t, "POST", "/v3/templates", tc.body)
		if tc.status == http.StatusAccepted {
			if r.status != tc.status {
				t.Errorf("%s: %d %s", tc.name, r.status, r.body)
			}
			continue
		}
		wantRefusal(t, tc.name, r, tc.status, tc.names)
	}
	for _, p := range []string{"/templates?teamID=other", "/v2/templates?teamID=other"} {
		wantRefusal(t, "GET "+p, a.do(t, "GET", p, nil), http.StatusForbidden, "teamID 'other'")
	}
	for _, p := range []string{"/templates?teamID=" + sandbox.DefaultTeamID, "/v2/templates?teamID=" + sandbox.DefaultTeamID} {
		if r := a.do(t, "GET", p, nil); r.status != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, r.status, r.body)
		}
	}

	var req struct{ TemplateID, BuildID string }
	a.do(t, "POST", "/v3/templates", map[string]any{"name": "private"}).decode(t, &req)
	start := "/v2/templates/" + req.TemplateID + "/builds/" + req.BuildID
	r := a.do(t, "POST", start, map[string]any{"fromImage": "registry.example/private:1",
		"fromImageRegistry": map[string]any{"type": "registry", "username": "u", "password": "p"}})
	wantRefusal(t, "start with fromImageRegistry", r, http.StatusBadRequest, "fromImageRegistry")

	spec := map[string]any{"fromImage": "warren/base", "fromImageRegistry": nil}
	id, first := a.build(t, "paged", spec)
	_, second := a.build(t, "paged", spec)
	logs := "/templates/" + id + "/builds/" + first + "/logs"
	wantRefusal(t, "build logs from a bad source", a.do(t, "GET", logs+"?source=archive", nil), http.StatusBadRequest, "source")
	if r := a.do(t, "GET", logs+"?source=persistent", nil); r.status != http.StatusOK {
		t.Errorf("build logs from the persistent source: %d %s", r.status, r.body)
	}

	var page templateWithBuildsJSON
	r = a.do(t, "GET", "/templates/"+id+"?limit=1", nil)
	r.decode(t, &page)
	if len(page.Builds) != 1 || page.Builds[0].BuildID != first || r.header.Get("X-Next-Token") != first {
		t.Fatalf("first page: %+v, next %q", page.Builds, r.header.Get("X-Next-Token"))
	}
	r = a.do(t, "GET", "/templates/"+id+"?limit=1&nextToken="+first, nil)
	r.decode(t, &page)
	if len(page.Builds) != 1 || page.Builds[0].BuildID != second || r.header.Get("X-Next-Token") != "" {
		t.Errorf("second page: %+v, next %q", page.Builds, r.header.Get("X-Next-Token"))
	}
	wantError(t, "builds with a bad next token", a.do(t, "GET", "/templates/"+id+"?nextToken=nope", nil), http.StatusBadRequest)
}
