package nodeagent

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

// testClient calls a test's node agent without checking its key, as a
// caller that does not hold the token would.
var testClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// tlsServer serves h over TLS with the key of the tests' token.
func tlsServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	cfg, err := ServerTLS(token)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.TLS = cfg
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

// TestClientPinsTheTokensKey: a client reaches a node agent of its own
// token, and refuses one of another token (which could be anyone) before
// it sends anything, the token included.
func TestClientPinsTheTokensKey(t *testing.T) {
	sent := false
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent = true
		w.WriteHeader(http.StatusNoContent)
	})
	ts := tlsServer(t, h)
	addr := strings.TrimPrefix(ts.URL, "https://")
	if _, err := NewClient(token).Frozen(t.Context(), addr, "11111111-2222-4333-8444-555555555555"); err == nil || !sent {
		// 204 decodes to nothing: the call reached the handler.
		if !sent {
			t.Fatalf("the agent of the client's own token was not reached: %v", err)
		}
	}
	sent = false
	other := strings.Repeat("b", 64)
	err := NewClient(other).Freeze(t.Context(), addr, "11111111-2222-4333-8444-555555555555")
	if sent || sandbox.KindOf(err) != sandbox.KindUnavailable || !strings.Contains(err.Error(), "not the one of the shared token") {
		t.Fatalf("a node agent of another token: sent=%v, %v", sent, err)
	}
}
