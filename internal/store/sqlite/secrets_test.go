package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sandbox"
)

// TestSecrets: names are unique per team, every read and write is the
// team's, updates are compare-and-swap on the version, and lists page by
// name.
func TestSecrets(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	now := time.Unix(1700000000, 0).UTC()
	mk := func(team, name string) sandbox.Secret {
		sec := sandbox.Secret{ID: sandbox.NewSecretID(), TeamID: team, Name: name, Version: 1,
			Metadata: map[string]string{"k": "v"}, CreatedAt: now, UpdatedAt: now, Sealed: []byte{1, 2, 3}}
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
