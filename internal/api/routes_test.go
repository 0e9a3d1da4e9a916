package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

// TestMethodNotAllowed: a known path with another method is 405 with
// Allow and E2B's error body; an unknown path stays 404.
func TestMethodNotAllowed(t *testing.T) {
	a := newAPI(t)
	for _, tc := range []struct {
		name, method, path string
		status             int
		allow              string
	}{
		{"PATCH a sandbox", "PATCH", "/sandboxes/x", 405, "GET, HEAD, DELETE"},
		{"GET timeout", "GET", "/sandboxes/x/timeout", 405, "POST"},
		{"HEAD timeout", "HEAD", "/sandboxes/x/timeout", 405, "POST"},
		{"DELETE the list", "DELETE", "/v2/sandboxes", 405, "GET, HEAD, POST"},
		{"POST network", "POST", "/sandboxes/x/network", 405, "PUT"},
		{"PUT health", "PUT", "/health", 405, "GET, HEAD"},
		{"unknown method", "BREW", "/sandboxes/x", 405, "GET, HEAD, DELETE"},
		{"unknown path", "GET", "/nosuch", 404, ""},
		{"unknown sub-path", "PATCH", "/sandboxes/x/nosuch", 404, ""},
		{"trailing slash", "PATCH", "/sandboxes/x/", 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.do(t, tc.method, tc.path, nil)
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow %q, want %q", got, tc.allow)
			}
			if tc.method == "HEAD" {
				if r.status != tc.status {
					t.Errorf("status %d, want %d", r.status, tc.status)
				}
				return
			}
			wantError(t, tc.name, r, tc.status)
		})
	}
	// The right method still reaches the handler.
	wantError(t, "GET unknown sandbox", a.do(t, "GET", "/sandboxes/x", nil), 404)
}

// noKeys knows no key; its key management is never called.
type noKeys struct{ KeyLookup }

func (noKeys) APIKeyByHash(context.Context, string) (sandbox.APIKey, error) {
	return sandbox.APIKey{}, sandbox.Errorf(sandbox.KindNotFound, "no such key")
}

func (noKeys) GetTeam(context.Context, string) (sandbox.Team, error) {
	return sandbox.Team{}, sandbox.Errorf(sandbox.KindNotFound, "no such team")
}

// TestAPIKeyShape: keys are e2b_ and lowercase hex of any length, what
// SDK 2.30-2.45 accept; an uppercase key is refused before any lookup.
func TestAPIKeyShape(t *testing.T) {
	a := newAPI(t)
	const odd = "e2b_abc"
	const upper = "e2b_ABCD"
	h := New(Config{Manager: a.m, Keys: noKeys{}, ExtraKeys: []string{odd, upper}})
	for _, tc := range []struct {
		name, key string
		status    int
	}{
		{"odd length", odd, 200},
		{"uppercase hex", "e2b_ABC", 401},
		{"uppercase configured key", upper, 401},
		{"too long", "e2b_" + strings.Repeat("a", 129), 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/v2/sandboxes", nil)
			req.Header.Set("X-API-Key", tc.key)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tc.status {
				t.Errorf("status %d (%s), want %d", w.Code, w.Body, tc.status)
			}
		})
	}
	// A stored key with its hex in uppercase is not the key.
	wantError(t, "uppercase stored key", a.doKey(t, "e2b_"+strings.ToUpper(a.key[4:]), "GET", "/v2/sandboxes", nil), http.StatusUnauthorized)
}
