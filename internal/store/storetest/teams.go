package storetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sandbox"
)

// testTeamQuotas: a team's quota is kept as set, with its unset fields
// unset and its zeros zero; PutTeam leaves it alone; an unknown team has
// none to set.
func testTeamQuotas(t *testing.T, s Store) {
	ctx := t.Context()
	if err := s.PutTeam(ctx, sandbox.Team{ID: "t2", Name: "two", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	two, zero, rate := 2, 0, 1.5
	q := sandbox.Quota{MaxSandboxes: &two, MaxVolumes: &zero, MaxCreatesPerSecond: &rate}
	if err := s.SetTeamQuota(ctx, "t2", q); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTeam(ctx, sandbox.Team{ID: "t2", Name: "renamed", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTeam(ctx, "t2")
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.Team{ID: "t2", Name: "renamed", CreatedAt: t0, Quota: q}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("team (-want +got):\n%s", diff)
	}
	teams, err := s.ListTeams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tm := range teams {
		ids = append(ids, tm.ID)
	}
	if diff := cmp.Diff([]string{sandbox.DefaultTeamID, "t2"}, ids); diff != "" {
		t.Errorf("ListTeams IDs (-want +got):\n%s", diff)
	}
	if teams[1].Quota.Over(sandbox.Limits{MaxVCPUs: 8}) != (sandbox.Limits{MaxSandboxes: 2, MaxVCPUs: 8, MaxCreatesPerSecond: 1.5}) {
		t.Errorf("listed quota = %+v", teams[1].Quota)
	}
	if err := s.SetTeamQuota(ctx, "nope", q); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("quota of an unknown team: err = %v, want not found", err)
	}
}

// testRenameAPIKey: a key's name changes, nothing else of it does.
func testRenameAPIKey(t *testing.T, s Store) {
	ctx := t.Context()
	k := sandbox.APIKey{ID: "k1", TeamID: sandbox.DefaultTeamID, Name: "ci", Hash: sandbox.HashAPIKey("e2b_00"), Mask: "e2b_…00", CreatedAt: t0}
	if err := s.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := s.RenameAPIKey(ctx, "k1", "deploy"); err != nil {
		t.Fatal(err)
	}
	got, err := s.APIKeyByHash(ctx, k.Hash)
	k.Name = "deploy"
	if err != nil || !cmp.Equal(k, got) {
		t.Errorf("renamed key = %+v, %v; want %+v", got, err, k)
	}
	if err := s.RenameAPIKey(ctx, "nope", "x"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("rename of an unknown key: err = %v, want not found", err)
	}
}
