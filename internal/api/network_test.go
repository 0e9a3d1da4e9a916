package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestEgressDomains: domains are accepted in allowOut, on create and on PUT
// network, and refused in denyOut with a 400 that says what to do.
func TestEgressDomains(t *testing.T) {
	a := newAPI(t)
	r := a.do(t, "POST", "/v2/sandboxes", map[string]any{"templateID": "base", "network": map[string]any{"denyOut": []string{"*.example.com"}}})
	wantError(t, "create denying a domain", r, http.StatusBadRequest)
	if !strings.Contains(string(r.body), "only IP addresses and CIDRs can be denied") {
		t.Errorf("create denying a domain: %s", r.body)
	}
	a.create(t, map[string]any{"templateID": "base", "network": map[string]any{"allowOut": []string{"*.example.com"}, "denyOut": []string{"0.0.0.0/0"}}})
	sb := a.create(t, map[string]any{"templateID": "base"})
	p := "/sandboxes/" + sb["sandboxID"].(string) + "/network"
	r = a.do(t, "PUT", p, map[string]any{"allowOut": []string{"example.com"}, "denyOut": []string{"example.org"}})
	wantError(t, "PUT network denying a domain", r, http.StatusBadRequest)
	r = a.do(t, "PUT", p, map[string]any{"denyOut": []string{"10.0.0.0/33"}})
	wantError(t, "PUT network with a bad CIDR", r, http.StatusBadRequest)
	r = a.do(t, "PUT", p, map[string]any{"allowOut": []string{"not a domain"}})
	wantError(t, "PUT network with garbage", r, http.StatusBadRequest)
	if r = a.do(t, "PUT", p, map[string]any{"allowOut": []string{"10.1.2.3", "example.com"}, "denyOut": []string{"0.0.0.0/0"}}); r.status != http.StatusNoContent {
		t.Errorf("PUT network with addresses and a domain: %d %s", r.status, r.body)
	}
}
