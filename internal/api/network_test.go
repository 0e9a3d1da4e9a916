package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestEgressDomainsRefused: domains in allowOut/denyOut are refused with
// a 400 that says so, on create and on PUT network, rather than accepted
// and not enforced.
func TestEgressDomainsRefused(t *testing.T) {
	a := newAPI(t)
	r := a.do(t, "POST", "/v2/sandboxes", map[string]any{"templateID": "base", "network": map[string]any{"allowOut": []string{"*.example.com"}}})
	wantError(t, "create with a domain", r, http.StatusBadRequest)
	if !strings.Contains(string(r.body), "domain rules are not supported yet") {
		t.Errorf("create with a domain: %s", r.body)
	}
	sb := a.create(t, map[string]any{"templateID": "base"})
	p := "/sandboxes/" + sb["sandboxID"].(string) + "/network"
	r = a.do(t, "PUT", p, map[string]any{"allowOut": []string{"example.com"}, "denyOut": []string{"0.0.0.0/0"}})
	wantError(t, "PUT network with a domain", r, http.StatusBadRequest)
	if !strings.Contains(string(r.body), "domain rules are not supported yet") {
		t.Errorf("PUT network with a domain: %s", r.body)
	}
	r = a.do(t, "PUT", p, map[string]any{"denyOut": []string{"10.0.0.0/33"}})
	wantError(t, "PUT network with a bad CIDR", r, http.StatusBadRequest)
	if r = a.do(t, "PUT", p, map[string]any{"allowOut": []string{"10.1.2.3"}, "denyOut": []string{"0.0.0.0/0"}}); r.status != http.StatusNoContent {
		t.Errorf("PUT network with addresses: %d %s", r.status, r.body)
	}
}
