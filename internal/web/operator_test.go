package web

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/sandbox"
)

// TestOperatorAPI: the operator lists teams with their use, sets a quota
// that holds at the next create, kills a team's sandboxes and drains the
// server; a team's session may do none of it.
func TestOperatorAPI(t *testing.T) {
	w := newWeb(t)
	w.create(t, "other")
	w.create(t, "other")
	token, err := CreateLogin(context.Background(), w.st, sandbox.DefaultTeamID, w.clock.now())
	if err != nil {
		t.Fatal(err)
	}
	op := w.login(t, loginRequest{Token: token})
	team := w.login(t, loginRequest{APIKey: w.key})

	for _, tc := range []struct{ method, path string }{
		{"GET", "/dashboard/api/operator/teams"},
		{"PUT", "/dashboard/api/operator/teams/other/quota"},
		{"POST", "/dashboard/api/operator/teams/other/kill"},
		{"PUT", "/dashboard/api/operator/drain"},
	} {
		if r := w.do(t, team, tc.method, tc.path, map[string]any{}); r.status != http.StatusForbidden {
			t.Errorf("%s %s by a team's session: %d %s, want 403", tc.method, tc.path, r.status, r.body)
		}
	}

	r := w.do(t, op, "GET", "/dashboard/api/operator/teams", nil)
	var teams []teamQuotaJSON
	if err := json.Unmarshal(r.body, &teams); r.status != http.StatusOK || err != nil || len(teams) != 2 {
		t.Fatalf("teams: %d %s", r.status, r.body)
	}
	if other := teams[1]; other.ID != "other" || other.Usage.Sandboxes != 2 || other.Limits.MaxSandboxes != 0 {
		t.Errorf("team other = %+v, want 2 sandboxes and no limit", other)
	}

	r = w.do(t, op, "PUT", "/dashboard/api/operator/teams/other/quota", map[string]any{"maxSandboxes": 2})
	if r.status != http.StatusOK {
		t.Fatalf("set quota: %d %s", r.status, r.body)
	}
	_, err = w.m.Create(context.Background(), lifecycle.CreateRequest{TeamID: "other", Template: "base", Timeout: time.Minute})
	if sandbox.Message(err) != "team 'other' has 2 of 2 sandboxes running" {
		t.Errorf("create past the quota set: %v", err)
	}
	if r := w.do(t, op, "PUT", "/dashboard/api/operator/teams/other/quota", map[string]any{"maxSandboxes": -1}); r.status != http.StatusBadRequest {
		t.Errorf("negative quota: %d %s, want 400", r.status, r.body)
	}

	r = w.do(t, op, "POST", "/dashboard/api/operator/teams/other/kill", nil)
	if r.status != http.StatusOK || string(r.body) != "{\"killed\":2}\n" {
		t.Errorf("kill all: %d %s, want 2 killed", r.status, r.body)
	}

	if r := w.do(t, op, "PUT", "/dashboard/api/operator/drain", map[string]bool{"draining": true}); r.status != http.StatusOK {
		t.Fatalf("drain: %d %s", r.status, r.body)
	}
	_, err = w.m.Create(context.Background(), lifecycle.CreateRequest{TeamID: sandbox.DefaultTeamID, Template: "base", Timeout: time.Minute})
	if sandbox.KindOf(err) != sandbox.KindUnavailable || sandbox.RetryAfter(err) == 0 {
		t.Errorf("create while draining: %v, want 503 with a Retry-After", err)
	}
}
