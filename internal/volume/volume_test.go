package volume

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

func newService(t *testing.T, now func() time.Time) *Service {
	t.Helper()
	st, err := sqlite.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dir := t.TempDir()
	s, err := New(context.Background(), Config{Store: st, Dir: filepath.Join(dir, "volumes"), KeyFile: filepath.Join(dir, "key"), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAll(t, s) })
	return s
}

// deleteAll deletes the volumes left, so that their mounts go before
// the temporary directory does.
func deleteAll(t *testing.T, s *Service) {
	vols, err := s.st.ListAllVolumes(context.Background())
	if err != nil {
		t.Error(err)
	}
	for _, v := range vols {
		if err := s.Delete(context.Background(), v.TeamID, v.ID); err != nil {
			t.Error(err)
		}
	}
}

func TestCreateDelete(t *testing.T) {
	ctx := context.Background()
	s := newService(t, nil)
	v, err := s.Create(ctx, "team", "data")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(s.Dir(v.ID))
	if err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
		t.Fatalf("volume dir: %v %v, want drwxrwxrwt", fi.Mode(), err)
	}
	if _, err := s.Create(ctx, "team", "data"); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("same name again: %v, want conflict", err)
	}
	if _, err := s.Create(ctx, "other", "data"); err != nil {
		t.Errorf("same name in another team: %v", err)
	}
	for _, name := range []string{"", "a/b", "..", "a b", "é"} {
		if _, err := s.Create(ctx, "team", name); sandbox.KindOf(err) != sandbox.KindInvalid {
			t.Errorf("name %q: %v, want invalid", name, err)
		}
	}
	if _, err := s.Get(ctx, "other", v.ID); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("another team's get: %v, want not found", err)
	}
	if err := s.Delete(ctx, "other", v.ID); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("another team's delete: %v, want not found", err)
	}
	if err := s.Delete(ctx, "team", v.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir(v.ID)); !os.IsNotExist(err) {
		t.Errorf("dir after delete: %v", err)
	}
	if _, err := s.Get(ctx, "team", v.ID); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("get after delete: %v, want not found", err)
	}
}

func TestTokens(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newService(t, func() time.Time { return now })
	a, _ := s.Create(ctx, "team", "a")
	b, _ := s.Create(ctx, "team", "b")
	tok := s.Token(a)
	if v, err := s.Verify(ctx, a.ID, tok); err != nil || v.ID != a.ID {
		t.Fatalf("own token: %v %v", v, err)
	}
	tests := []struct {
		name  string
		id    string
		token string
		want  sandbox.Kind
	}{
		{"empty", a.ID, "", sandbox.KindUnauthenticated},
		{"garbage", a.ID, "x.y", sandbox.KindUnauthenticated},
		{"tampered", a.ID, tok[:len(tok)-2] + "AA", sandbox.KindUnauthenticated},
		{"another volume", b.ID, tok, sandbox.KindForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Verify(ctx, tt.id, tt.token); sandbox.KindOf(err) != tt.want {
				t.Errorf("Verify: %v, want kind %v", err, tt.want)
			}
		})
	}
	now = now.Add(TokenTTL)
	if _, err := s.Verify(ctx, a.ID, tok); sandbox.KindOf(err) != sandbox.KindForbidden {
		t.Errorf("expired: %v, want forbidden", err)
	}
	now = now.Add(-time.Hour)
	if err := s.Delete(ctx, "team", a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, a.ID, tok); sandbox.KindOf(err) != sandbox.KindForbidden {
		t.Errorf("deleted volume: %v, want forbidden", err)
	}
}

// A restarted server keeps its key, so tokens it issued still verify.
func TestKeyKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	k1, err := loadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := loadKey(path)
	if err != nil || string(k1) != string(k2) {
		t.Fatalf("key changed across loads: %v", err)
	}
}

// TestCreateLimits: a team at its number of volumes is refused one more
// (429, naming the limit); another team is not.
func TestCreateLimits(t *testing.T) {
	s := newService(t, nil)
	s.limits = func(_ context.Context, team string) (sandbox.Limits, error) {
		if team == "a" {
			return sandbox.Limits{MaxVolumes: 1}, nil
		}
		return sandbox.Limits{}, nil
	}
	t.Cleanup(func() { deleteAll(t, s) })
	ctx := context.Background()
	if _, err := s.Create(ctx, "a", "one"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Create(ctx, "a", "two")
	if sandbox.KindOf(err) != sandbox.KindLimited || sandbox.Message(err) != "team 'a' has 1 of 1 volumes" {
		t.Errorf("second volume of a: %v, want refused at 1 of 1", err)
	}
	if _, err := s.Create(ctx, "b", "two"); err != nil {
		t.Errorf("volume of another team: %v", err)
	}
}
