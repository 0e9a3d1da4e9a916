package api

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// wantRefusal is wantError for a 4xx whose message names what it refuses.
func wantRefusal(t *testing.T, what string, r response, status int, names string) {
	t.Helper()
	wantError(t, what, r, status)
	if !strings.Contains(string(r.body), names) {
		t.Errorf("%s: %s does not name %q", what, r.body, names)
	}
}

// TestNetworkUpdateRefusesCreateOnlyFields: E2B's network update carries
// egress settings only; the settings fixed at create are refused rather
// than validated and dropped.
func TestNetworkUpdateRefusesCreateOnlyFields(t *testing.T) {
	a := newAPI(t)
	sb := a.create(t, map[string]any{"templateID": "base", "network": map[string]any{"maskRequestHost": "kept.example", "httpsPorts": []int{8443}}})
	p := "/sandboxes/" + sb["sandboxID"].(string) + "/network"
	for _, tc := range []struct {
		field string
		value any
	}{
		{"allowPublicTraffic", false},
		{"maskRequestHost", "other.example"},
		{"httpsPorts", []int{9443}},
		{"httpsPorts", []int{}},
	} {
		r := a.do(t, "PUT", p, map[string]any{"allowOut": []string{"10.0.0.1"}, tc.field: tc.value})
		wantRefusal(t, "PUT network with "+tc.field, r, http.StatusBadRequest, "network."+tc.field)
	}
	if r := a.do(t, "PUT", p, map[string]any{"allowOut": []string{"10.0.0.1"}, "denyOut": []string{"0.0.0.0/0"}}); r.status != http.StatusNoContent {
		t.Fatalf("PUT network: %d %s", r.status, r.body)
	}
	var got sandboxDetailJSON
	a.do(t, "GET", "/sandboxes/"+sb["sandboxID"].(string), nil).decode(t, &got)
	if got.Network.MaskRequestHost != "kept.example" || !slices.Equal(got.Network.HTTPSPorts, []int{8443}) || !*got.Network.AllowPublicTraffic {
		t.Errorf("create-only settings changed by updates: %+v", got.Network)
	}
}

// TestV2RefusesInsecure: /v2/sandboxes always secures a sandbox, so
// secure false is refused there; v1 still honours it.
func TestV2RefusesInsecure(t *testing.T) {
	a := newAPI(t)
	r := a.do(t, "POST", "/v2/sandboxes", map[string]any{"templateID": "base", "secure": false})
	wantRefusal(t, "v2 create with secure false", r, http.StatusBadRequest, "secure false")
	a.create(t, map[string]any{"templateID": "base", "secure": true})
	r = a.do(t, "POST", "/sandboxes", map[string]any{"templateID": "base", "secure": false})
	var sb sandboxJSON
	if r.decode(t, &sb); r.status != http.StatusCreated || sb.EnvdAccessToken != "" {
		t.Errorf("v1 create with secure false: %d %s", r.status, r.body)
	}
}

// TestResumeFields: the deprecated resume honours memory false (a reboot
// on the filesystem, as connect's) and autoPause, which replaces the
// sandbox's action on timeout, as on E2B.
func TestResumeFields(t *testing.T) {
	a := newAPI(t)
	sb := a.create(t, map[string]any{"templateID": "base", "timeout": 600})
	id := sb["sandboxID"].(string)
	onTimeout := func() string {
		var got sandboxDetailJSON
		a.do(t, "GET", "/sandboxes/"+id, nil).decode(t, &got)
		return got.Lifecycle.OnTimeout
	}
	pause := func() {
		t.Helper()
		if r := a.do(t, "POST", "/sandboxes/"+id+"/pause", nil); r.status != http.StatusNoContent {
			t.Fatalf("pause: %d %s", r.status, r.body)
		}
	}
	pause()
	calls := len(a.rt.Calls())
	if r := a.do(t, "POST", "/sandboxes/"+id+"/resume", map[string]any{"timeout": 60, "autoPause": true, "memory": false}); r.status != http.StatusCreated {
		t.Fatalf("resume without memory: %d %s", r.status, r.body)
	}
	var ops []string
	for _, c := range a.rt.Calls()[calls:] {
		op, _, _ := strings.Cut(c, " ")
		ops = append(ops, op)
	}
	if !slices.Equal(ops, []string{"Stop", "Start"}) {
		t.Errorf("runtime calls of a resume without memory = %v, want [Stop Start]", ops)
	}
	if got := onTimeout(); got != "pause" {
		t.Errorf("onTimeout after a resume with autoPause true = %q, want pause", got)
	}
	pause()
	if r := a.do(t, "POST", "/sandboxes/"+id+"/resume", map[string]any{"timeout": 60, "autoPause": false}); r.status != http.StatusCreated {
		t.Fatalf("resume with autoPause false: %d %s", r.status, r.body)
	}
	if got := onTimeout(); got != "kill" {
		t.Errorf("onTimeout after a resume with autoPause false = %q, want kill", got)
	}
	pause()
	if r := a.do(t, "POST", "/sandboxes/"+id+"/resume", map[string]any{"timeout": 60}); r.status != http.StatusCreated || onTimeout() != "kill" {
		t.Errorf("resume without autoPause: %d %s, onTimeout %q, want kill kept", r.status, r.body, onTimeout())
	}
}
