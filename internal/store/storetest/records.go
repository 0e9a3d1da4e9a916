package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sandbox"
)

func testPoolDemand(t *testing.T, s Store) {
	ctx := t.Context()
	if got, err := s.PoolDemand(ctx); err != nil || len(got) != 0 {
		t.Fatalf("demand of a new store = %v, %v; want none", got, err)
	}
	a := sandbox.PoolDemand{TemplateID: "base", TeamID: "default",
		Peaks: []sandbox.DemandPeak{{At: t0, Size: 50}, {At: t0.Add(time.Minute), Size: 10}}}
	b := sandbox.PoolDemand{TemplateID: "tpl1", TeamID: "t2",
		Peaks: []sandbox.DemandPeak{{At: t0, Size: 3}}}
	if err := s.SavePoolDemand(ctx, []sandbox.PoolDemand{b, a}); err != nil {
		t.Fatal(err)
	}
	got, err := s.PoolDemand(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]sandbox.PoolDemand{a, b}, got); diff != "" {
		t.Errorf("demand (-want +got):\n%s", diff)
	}
	// A save replaces: what it leaves out is gone.
	if err := s.SavePoolDemand(ctx, []sandbox.PoolDemand{b}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.PoolDemand(ctx); !cmp.Equal([]sandbox.PoolDemand{b}, got) {
		t.Errorf("after a second save (-want +got):\n%s", cmp.Diff([]sandbox.PoolDemand{b}, got))
	}
}

// Secret names are unique per team, every read and write is the team's,
// updates are compare-and-swap on the version, and lists page by name.
func testSecrets(t *testing.T, s Store) {
	ctx := t.Context()
	now := time.Unix(1700000000, 0).UTC()
	mk := func(team, name string) sandbox.Secret {
		sec := sandbox.Secret{ID: sandbox.NewSecretID(), TeamID: team, Name: name, Version: 1,
			Metadata: map[string]string{"k": "v"}, CreatedAt: now, UpdatedAt: now, Sealed: []byte{1, 2, 0, 3}}
		if err := s.CreateSecret(ctx, sec); err != nil {
			t.Fatal(err)
		}
		return sec
	}
	a := mk("t1", "b")
	mk("t1", "a")
	mk("t1", "c")
	other := mk("t2", "b")
	if err := s.CreateSecret(ctx, sandbox.Secret{ID: sandbox.NewSecretID(), TeamID: "t1", Name: "b", Version: 1, Metadata: map[string]string{}, Sealed: []byte{1}}); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("a second name in a team: %v", err)
	}
	got, err := s.SecretByName(ctx, "t1", "b")
	if err != nil || !cmp.Equal(got, a) {
		t.Errorf("SecretByName = %+v, %v; want %+v", got, err, a)
	}
	for _, f := range []func() error{
		func() error { _, err := s.GetSecret(ctx, "t1", other.ID); return err },
		func() error { return s.DeleteSecret(ctx, "t1", other.ID) },
		func() error { return s.UpdateSecret(ctx, sandbox.Secret{ID: other.ID, TeamID: "t1", Version: 2}, 1) },
	} {
		if err := f(); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Errorf("another team's secret: %v, want not found", err)
		}
	}

	next := a
	next.Version, next.Sealed, next.Metadata = 2, []byte{9}, map[string]string{}
	if err := s.UpdateSecret(ctx, next, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateSecret(ctx, next, 1); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("an update from a stale version: %v", err)
	}
	if got, _ := s.GetSecret(ctx, "t1", a.ID); !cmp.Equal(got, next) {
		t.Errorf("after update %+v, want %+v", got, next)
	}

	var names []string
	for after := ""; ; {
		page, err := s.ListSecrets(ctx, "t1", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, p := range page {
			names = append(names, p.Name)
		}
		after = page[len(page)-1].Name
	}
	if !cmp.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("listed %v", names)
	}
	if err := s.DeleteSecret(ctx, "t2", other.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SecretByName(ctx, "t2", "b"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("a deleted secret: %v", err)
	}
}

// Volume names are unique per team.
func testVolumes(t *testing.T, s Store) {
	ctx := t.Context()
	a := sandbox.Volume{ID: "v1", TeamID: "t1", Name: "data", CreatedAt: t0}
	b := sandbox.Volume{ID: "v2", TeamID: "t1", Name: "cache", CreatedAt: t0.Add(time.Second)}
	c := sandbox.Volume{ID: "v3", TeamID: "t2", Name: "data", CreatedAt: t0}
	for _, v := range []sandbox.Volume{a, b, c} {
		if err := s.PutVolume(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutVolume(ctx, sandbox.Volume{ID: "v4", TeamID: "t1", Name: "data", CreatedAt: t0}); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("a second name in a team: %v, want conflict", err)
	}
	if got, err := s.GetVolume(ctx, "v1"); err != nil || !cmp.Equal(got, a) {
		t.Errorf("GetVolume = %+v, %v; want %+v", got, err, a)
	}
	if got, _ := s.ListVolumes(ctx, "t1"); !cmp.Equal(got, []sandbox.Volume{a, b}) {
		t.Errorf("ListVolumes = %+v", got)
	}
	if got, _ := s.ListAllVolumes(ctx); !cmp.Equal(got, []sandbox.Volume{a, c, b}) {
		t.Errorf("ListAllVolumes = %+v", got)
	}
	if err := s.DeleteVolume(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteVolume(ctx, "v1"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("deleting it again: %v, want not found", err)
	}
	if _, err := s.GetVolume(ctx, "v1"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("a deleted volume: %v, want not found", err)
	}
	if err := s.PutVolume(ctx, sandbox.Volume{ID: "v5", TeamID: "t1", Name: "data", CreatedAt: t0}); err != nil {
		t.Errorf("the freed name: %v", err)
	}
}
