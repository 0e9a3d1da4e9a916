package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestCreateLimits: the limits E2B's API states for create and PUT
// network bodies.
func TestCreateLimits(t *testing.T) {
	a := newAPI(t)
	ports := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = 1000 + i
		}
		return out
	}
	net := func(n map[string]any) map[string]any { return map[string]any{"templateID": "base", "network": n} }
	proxy := func(p map[string]any) map[string]any { return net(map[string]any{"egressProxy": p}) }
	for _, tc := range []struct {
		name, path string
		body       map[string]any
		status     int
		message    string // a part of the error's message
	}{
		{"https ports", "/v2/sandboxes", net(map[string]any{"httpsPorts": []int{443, 8443}}), 201, ""},
		{"128 https ports", "/v2/sandboxes", net(map[string]any{"httpsPorts": ports(128)}), 201, ""},
		{"129 https ports", "/v2/sandboxes", net(map[string]any{"httpsPorts": ports(129)}), 400, "at most 128"},
		{"envd port", "/v2/sandboxes", net(map[string]any{"httpsPorts": []int{443, 49983}}), 400, "envd port 49983"},
		{"port 0", "/v2/sandboxes", net(map[string]any{"httpsPorts": []int{0}}), 400, "0 is not a port"},
		{"negative port", "/v2/sandboxes", net(map[string]any{"httpsPorts": []int{-443}}), 400, "-443 is not a port"},
		{"port too large", "/v2/sandboxes", net(map[string]any{"httpsPorts": []int{65536}}), 400, "65536 is not a port"},
		{"egress proxy", "/v2/sandboxes", proxy(map[string]any{"address": "proxy.example.com:1080", "username": "u", "password": "p"}), 201, ""},
		{"egress proxy IPv6", "/v2/sandboxes", proxy(map[string]any{"address": "[::1]:1080"}), 201, ""},
		{"egress proxy null", "/v2/sandboxes", net(map[string]any{"egressProxy": nil}), 201, ""},
		{"egress proxy without port", "/v2/sandboxes", proxy(map[string]any{"address": "proxy.example.com"}), 400, "is not host:port"},
		{"egress proxy without host", "/v2/sandboxes", proxy(map[string]any{"address": ":1080"}), 400, "is not host:port"},
		{"egress proxy port 0", "/v2/sandboxes", proxy(map[string]any{"address": "proxy:0"}), 400, "is not host:port"},
		{"egress proxy port too large", "/v2/sandboxes", proxy(map[string]any{"address": "proxy:65536"}), 400, "is not host:port"},
		{"egress proxy without address", "/v2/sandboxes", proxy(map[string]any{}), 400, "is not host:port"},
		{"egress proxy long username", "/v2/sandboxes", proxy(map[string]any{"address": "proxy:1080", "username": strings.Repeat("u", 256)}), 400, "at most 255 bytes"},
		{"egress proxy long password", "/v2/sandboxes", proxy(map[string]any{"address": "proxy:1080", "password": strings.Repeat("p", 256)}), 400, "at most 255 bytes"},
		{"private traffic v2", "/v2/sandboxes", net(map[string]any{"allowPublicTraffic": false}), 201, ""},
		{"private traffic v1 secure", "/sandboxes", map[string]any{"templateID": "base", "secure": true, "network": map[string]any{"allowPublicTraffic": false}}, 201, ""},
		{"private traffic v1 not secure", "/sandboxes", net(map[string]any{"allowPublicTraffic": false}), 400, "needs a secure sandbox"},
		{"env vars", "/v2/sandboxes", map[string]any{"templateID": "base", "envVars": map[string]string{"A": "1", "B_2": "x=y"}}, 201, ""},
		{"env var name with =", "/v2/sandboxes", map[string]any{"templateID": "base", "envVars": map[string]string{"A=B": "1"}}, 400, "envVars: invalid name"},
		{"empty env var name", "/v2/sandboxes", map[string]any{"templateID": "base", "envVars": map[string]string{"": "1"}}, 400, "(a name is not empty"},
		{"env var name with NUL", "/sandboxes", map[string]any{"templateID": "base", "envVars": map[string]string{"A\x00": "1"}}, 400, "envVars: invalid name"},
		{"env var value with NUL", "/v2/sandboxes", map[string]any{"templateID": "base", "envVars": map[string]string{"A": "1\x002"}}, 400, "contains a NUL byte"},
		{"pause without memory", "/v2/sandboxes", map[string]any{"templateID": "base", "autoPause": true, "autoPauseMemory": false}, 201, ""},
		{"pause without memory and auto-resume", "/v2/sandboxes",
			map[string]any{"templateID": "base", "autoPause": true, "autoPauseMemory": false, "autoResume": map[string]bool{"enabled": true}}, 400, "autoResume cannot be combined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantAnswer(t, tc.name, a.do(t, "POST", tc.path, tc.body), tc.status, tc.message)
		})
	}

	p := "/sandboxes/" + a.create(t, nil)["sandboxID"].(string) + "/network"
	wantError(t, "PUT network with a bad proxy", a.do(t, "PUT", p, map[string]any{"egressProxy": map[string]any{"address": "nope"}}), 400)
	if r := a.do(t, "PUT", p, map[string]any{"egressProxy": map[string]any{"address": "proxy:1080"}}); r.status != http.StatusNoContent {
		t.Errorf("PUT network with a proxy: %d %s", r.status, r.body)
	}
}
