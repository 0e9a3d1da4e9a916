package web

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

// The server view's figures are the whole server's: the operator's
// session (a login link of warren dashboard) gets them and the state
// dir; a session of a team's API key gets the settings only.
func TestServerViewFiguresForOperatorOnly(t *testing.T) {
	w := newWeb(t)
	w.create(t, "other")
	w.create(t, sandbox.DefaultTeamID)
	token, err := CreateLogin(context.Background(), w.st, sandbox.DefaultTeamID, w.clock.now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		login    loginRequest
		running  int
		stateDir string
	}{
		{"operator", loginRequest{Token: token}, 2, "/var/lib/warren"},
		{"team key", loginRequest{APIKey: w.key}, 0, ""},
		{"other team's key", loginRequest{APIKey: w.otherKey}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := w.do(t, w.login(t, tc.login), "GET", "/dashboard/api/server", nil)
			var got serverJSON
			if err := json.Unmarshal(r.body, &got); r.status != http.StatusOK || err != nil {
				t.Fatalf("server view: %d %s", r.status, r.body)
			}
			if got.Running != tc.running || got.StateDir != tc.stateDir || got.MaxTimeoutSec == 0 {
				t.Errorf("running %d, stateDir %q, maxTimeoutSec %d; want %d, %q and the settings",
					got.Running, got.StateDir, got.MaxTimeoutSec, tc.running, tc.stateDir)
			}
		})
	}
}
