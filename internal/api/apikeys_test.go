package api

import (
	"net/http"
	"testing"
)

// TestAPIKeys: a team makes a key (shown once), finds it listed masked,
// renames it, signs in with it (as a Bearer token too) and revokes it;
// another team's keys are not found.
func TestAPIKeys(t *testing.T) {
	a := newAPI(t)
	r := a.do(t, "POST", "/api-keys", map[string]string{"name": "ci"})
	var made teamAPIKeyJSON
	r.decode(t, &made)
	if r.status != http.StatusCreated || made.Key == "" || made.Name != "ci" || made.Mask.Prefix != "e2b_" ||
		made.Mask.ValueLength != 40 || made.Key[4:4+len(made.Mask.MaskedValuePrefix)] != made.Mask.MaskedValuePrefix {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := a.doKey(t, made.Key, "GET", "/sandboxes", nil); r.status != http.StatusOK {
		t.Errorf("the new key: %d %s", r.status, r.body)
	}
	if r := a.do(t, "PATCH", "/api-keys/"+made.ID, map[string]string{"name": "deploy"}); r.status != http.StatusOK {
		t.Errorf("rename: %d %s", r.status, r.body)
	}
	var keys []teamAPIKeyJSON
	a.do(t, "GET", "/api-keys", nil).decode(t, &keys)
	found := false
	for _, k := range keys {
		if k.Key != "" {
			t.Errorf("listed key %s shows its value", k.ID)
		}
		found = found || (k.ID == made.ID && k.Name == "deploy")
	}
	if !found {
		t.Errorf("renamed key not listed: %+v", keys)
	}
	for _, method := range []string{"PATCH", "DELETE"} {
		if r := a.doKey(t, a.otherKey, method, "/api-keys/"+made.ID, map[string]string{"name": "x"}); r.status != http.StatusNotFound {
			t.Errorf("%s of another team's key: %d %s, want 404", method, r.status, r.body)
		}
	}
	req, _ := http.NewRequest("GET", a.srv.URL+"/api-keys", nil)
	req.Header.Set("Authorization", "Bearer "+made.Key)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("bearer key: %v %v", res, err)
	}
	if r := a.do(t, "DELETE", "/api-keys/"+made.ID, nil); r.status != http.StatusNoContent {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	if r := a.doKey(t, made.Key, "GET", "/sandboxes", nil); r.status != http.StatusUnauthorized {
		t.Errorf("revoked key: %d, want 401", r.status)
	}
	if r := a.do(t, "POST", "/access-tokens", map[string]string{"name": "x"}); r.status != http.StatusGone {
		t.Errorf("access token: %d, want 410", r.status)
	}
}
