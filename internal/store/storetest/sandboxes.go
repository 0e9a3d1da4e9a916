package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sandbox"
)

func testSandboxes(t *testing.T, s Store) {
	ctx := t.Context()
	sb := sandbox.Sandbox{
		ID: "iabc", TeamID: "default", TemplateID: "base", Image: "warren/base",
		State: sandbox.StatePaused, PauseMode: sandbox.PauseFrozen,
		Metadata: map[string]string{"k": "v"}, EnvVars: map[string]string{"A": "1"},
		StartedAt: t0, EndAt: t0.Add(time.Hour), PausedAt: t0.Add(time.Minute), Remaining: 59 * time.Minute,
		AgentArgs: []string{"-code-interpreter"},
		Lifecycle: sandbox.Lifecycle{OnTimeout: sandbox.TimeoutPause, AutoResume: true},
		Network: sandbox.Network{AllowOut: []string{"1.1.1.1"}, EgressProxy: &sandbox.EgressProxy{Address: "p:1"},
			Rules: map[string][]sandbox.NetworkRule{"x.com": {{Headers: map[string]string{"A": "b"}}}}},
	}
	if err := s.PutSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSandbox(ctx, "iabc")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sb, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	sb.State = sandbox.StateRunning
	if err := s.PutSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	other := sandbox.Sandbox{ID: "idef", TeamID: "t2", State: sandbox.StateRunning, StartedAt: t0.Add(-time.Hour)}
	if err := s.PutSandbox(ctx, other); err != nil {
		t.Fatal(err)
	}
	paused := sandbox.Sandbox{ID: "ighi", TeamID: "default", State: sandbox.StatePaused, StartedAt: t0}
	if err := s.PutSandbox(ctx, paused); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		f    sandbox.SandboxFilter
		want []string
	}{
		{"all", sandbox.SandboxFilter{}, []string{"idef", "iabc", "ighi"}},
		{"running", sandbox.SandboxFilter{States: []sandbox.State{sandbox.StateRunning}}, []string{"idef", "iabc"}},
		{"team", sandbox.SandboxFilter{TeamID: "default"}, []string{"iabc", "ighi"}},
		{"team and states", sandbox.SandboxFilter{TeamID: "default", States: []sandbox.State{sandbox.StatePaused, sandbox.StateKilled}}, []string{"ighi"}},
	} {
		list, err := s.ListSandboxes(ctx, tt.f)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, ids(list)); diff != "" {
			t.Errorf("list %s (-want +got):\n%s", tt.name, diff)
		}
	}
	if err := s.AppendLog(ctx, sandbox.LogEntry{SandboxID: "iabc", Time: t0, Level: "info", Message: "m"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMetric(ctx, "iabc", sandbox.Stats{Time: t0}, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSandbox(ctx, "iabc"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSandbox(ctx, "iabc"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("get deleted: err = %v, want not found", err)
	}
	if logs, _ := s.Logs(ctx, "iabc", sandbox.LogQuery{}); len(logs) != 0 {
		t.Errorf("logs survived delete: %v", logs)
	}
	if ms, _ := s.Metrics(ctx, "iabc", time.Time{}, time.Time{}); len(ms) != 0 {
		t.Errorf("metrics survived delete: %v", ms)
	}
}

func ids(sbs []sandbox.Sandbox) []string {
	var out []string
	for _, sb := range sbs {
		out = append(out, sb.ID)
	}
	return out
}

// Many writers at once all land, each write whole.
func testConcurrentWrites(t *testing.T, s Store) {
	ctx := t.Context()
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Go(func() {
			sb := sandbox.Sandbox{ID: fmt.Sprintf("i%03d", i), TeamID: sandbox.DefaultTeamID, State: sandbox.StateRunning, StartedAt: t0}
			if err := s.PutSandbox(ctx, sb); err != nil {
				t.Error(err)
			}
			if err := s.AppendLog(ctx, sandbox.LogEntry{SandboxID: sb.ID, Time: t0, Level: "info", Message: sb.ID}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	all, err := s.ListSandboxes(ctx, sandbox.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 300 {
		t.Errorf("%d sandboxes stored, want 300", len(all))
	}
	if logs, _ := s.Logs(ctx, "i123", sandbox.LogQuery{}); len(logs) != 1 || logs[0].Message != "i123" {
		t.Errorf("logs of i123 = %+v, want its one line", logs)
	}
}

func testAPIKeys(t *testing.T, s Store) {
	ctx := t.Context()
	if err := s.PutTeam(ctx, sandbox.Team{ID: "t2", Name: "two", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if team, err := s.GetTeam(ctx, "t2"); err != nil || !cmp.Equal(team, sandbox.Team{ID: "t2", Name: "two", CreatedAt: t0}) {
		t.Errorf("GetTeam = %+v, %v", team, err)
	}
	k := sandbox.APIKey{ID: "k1", TeamID: sandbox.DefaultTeamID, Name: "ci", Hash: sandbox.HashAPIKey("e2b_00"), Mask: "e2b_…00", CreatedAt: t0}
	if err := s.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	k2 := sandbox.APIKey{ID: "k2", TeamID: "t2", Name: "other", Hash: sandbox.HashAPIKey("e2b_01"), Mask: "e2b_…01", CreatedAt: t0.Add(time.Second)}
	if err := s.CreateAPIKey(ctx, k2); err != nil {
		t.Fatal(err)
	}
	got, err := s.APIKeyByHash(ctx, k.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(k, got); diff != "" {
		t.Errorf("key (-want +got):\n%s", diff)
	}
	if err := s.CreateAPIKey(ctx, sandbox.APIKey{ID: "k3", TeamID: "nope", Hash: "h"}); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("key of unknown team: err = %v, want not found", err)
	}
	if list, _ := s.ListAPIKeys(ctx); !cmp.Equal(list, []sandbox.APIKey{k, k2}) {
		t.Errorf("ListAPIKeys = %v, want both keys", list)
	}
	if list, _ := s.ListTeamAPIKeys(ctx, "t2"); !cmp.Equal(list, []sandbox.APIKey{k2}) {
		t.Errorf("ListTeamAPIKeys = %v, want the team's key", list)
	}
	if err := s.DeleteAPIKey(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAPIKey(ctx, "k1"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("second revoke: err = %v, want not found", err)
	}
	if _, err := s.APIKeyByHash(ctx, k.Hash); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("revoked key still found: %v", err)
	}
}

// A login link works once and not after it expires; a session lasts
// until it expires or ends.
func testDashboard(t *testing.T, s Store) {
	ctx := t.Context()
	if err := s.CreateDashboardLogin(ctx, "nope", "no-team", t0.Add(time.Hour)); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("a login of an unknown team: %v, want not found", err)
	}
	for _, h := range []string{"l1", "l2"} {
		if err := s.CreateDashboardLogin(ctx, h, sandbox.DefaultTeamID, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if team, err := s.UseDashboardLogin(ctx, "l1", t0); err != nil || team != sandbox.DefaultTeamID {
		t.Errorf("first use = %q, %v", team, err)
	}
	if _, err := s.UseDashboardLogin(ctx, "l1", t0); sandbox.KindOf(err) != sandbox.KindUnauthenticated {
		t.Errorf("second use: %v, want unauthenticated", err)
	}
	if _, err := s.UseDashboardLogin(ctx, "l2", t0.Add(time.Minute)); sandbox.KindOf(err) != sandbox.KindUnauthenticated {
		t.Errorf("use of an expired login: %v, want unauthenticated", err)
	}

	ds := sandbox.DashboardSession{Hash: "s1", TeamID: sandbox.DefaultTeamID, CSRF: "c", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), Operator: true}
	if err := s.CreateDashboardSession(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if got, err := s.DashboardSessionByHash(ctx, "s1", t0.Add(time.Minute)); err != nil || !cmp.Equal(got, ds) {
		t.Errorf("session = %+v, %v; want %+v", got, err, ds)
	}
	if _, err := s.DashboardSessionByHash(ctx, "s1", t0.Add(time.Hour)); sandbox.KindOf(err) != sandbox.KindUnauthenticated {
		t.Errorf("an expired session: %v, want unauthenticated", err)
	}
	ds.Hash = "s2"
	if err := s.CreateDashboardSession(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDashboardSession(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DashboardSessionByHash(ctx, "s2", t0); sandbox.KindOf(err) != sandbox.KindUnauthenticated {
		t.Errorf("an ended session: %v, want unauthenticated", err)
	}
	if err := s.DeleteDashboardSession(ctx, "s2"); err != nil {
		t.Errorf("ending an unknown session: %v", err)
	}
}

func testSnapshots(t *testing.T, s Store) {
	ctx := t.Context()
	a := sandbox.Snapshot{ID: "s1", TeamID: "default", SandboxID: "i1", Name: "n", Image: "warren/snapshot:s1", CreatedAt: t0,
		AgentArgs: []string{"-code-interpreter"}}
	b := sandbox.Snapshot{ID: "s2", TeamID: "default", SandboxID: "i2", Image: "img", CreatedAt: t0.Add(time.Second),
		Memory: &sandbox.AgentIdentity{AgentSecret: "secret", AccessToken: "token"}}
	c := sandbox.Snapshot{ID: "s3", TeamID: "other", SandboxID: "i1", Image: "img", CreatedAt: t0}
	for _, sn := range []sandbox.Snapshot{a, b, c} {
		if err := s.PutSnapshot(ctx, sn); err != nil {
			t.Fatal(err)
		}
	}
	all, _ := s.ListSnapshots(ctx, "default", "")
	if diff := cmp.Diff([]sandbox.Snapshot{a, b}, all); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	one, _ := s.ListSnapshots(ctx, "default", "i1")
	if diff := cmp.Diff([]sandbox.Snapshot{a}, one); diff != "" {
		t.Errorf("by sandbox (-want +got):\n%s", diff)
	}
	if got, _ := s.GetSnapshot(ctx, "s1"); !cmp.Equal(a, got) {
		t.Errorf("get (-want +got):\n%s", cmp.Diff(a, got))
	}
	if err := s.DeleteSnapshot(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSnapshot(ctx, "s1"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("deleted snapshot: err = %v", err)
	}
	if err := s.DeleteSnapshot(ctx, "s1"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("deleting it again: err = %v, want not found", err)
	}
}
