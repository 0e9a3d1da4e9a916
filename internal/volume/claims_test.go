package volume

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

// fakeClaims records what the service asks of the cluster.
type fakeClaims struct {
	made    map[string]int // volume ID → size in MiB
	deleted []string
	served  []string // volume ID and the request's op and query
}

func (f *fakeClaims) CreateClaim(_ context.Context, id string, sizeMB int) error {
	f.made[id] = sizeMB
	return nil
}

func (f *fakeClaims) DeleteClaim(_ context.Context, id string) error {
	f.deleted = append(f.deleted, id)
	return nil
}

func (f *fakeClaims) ClaimName(id string) string { return "claim-" + id }

func (f *fakeClaims) ServeContent(w http.ResponseWriter, r *http.Request, id string) error {
	f.served = append(f.served, id+" "+r.PathValue("op")+"?"+r.URL.RawQuery)
	w.WriteHeader(http.StatusTeapot)
	return nil
}

func (f *fakeClaims) UsedBytes(context.Context, string) (int64, error) { return 5, nil }

func TestClaimsKeepTheContentAndCountAgainstQuotas(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir := t.TempDir()
	claims := &fakeClaims{made: map[string]int{}}
	s, err := New(ctx, Config{Store: st, Dir: filepath.Join(dir, "volumes"), KeyFile: filepath.Join(dir, "key"), Claims: claims,
		Limits: func(context.Context, string) (sandbox.Limits, error) {
			return sandbox.Limits{MaxVolumeMB: 2 * DefaultClaimMB}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Create(ctx, "team", "a")
	if err != nil {
		t.Fatal(err)
	}
	if claims.made[a.ID] != DefaultClaimMB || s.Source(a.ID) != "claim-"+a.ID {
		t.Errorf("claim %v, source %s", claims.made, s.Source(a.ID))
	}
	if _, err := s.Create(ctx, "team", "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "team", "c"); sandbox.KindOf(err) != sandbox.KindLimited {
		t.Errorf("a third claim of %d MiB past %d: %v, want limited", DefaultClaimMB, 2*DefaultClaimMB, err)
	}
	if u, err := s.Usage(ctx, a.ID); err != nil || u.UsedBytes != 5 || u.LimitBytes != DefaultClaimMB<<20 {
		t.Errorf("usage %+v, %v", u, err)
	}

	req := func(token string) int {
		r := httptest.NewRequest(http.MethodGet, ContentPrefix+a.ID+"/file?path=/x", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		return w.Code
	}
	if code := req("forged.token"); code != http.StatusUnauthorized || len(claims.served) != 0 {
		t.Errorf("a forged token: %d, forwarded %v", code, claims.served)
	}
	if code := req(s.Token(a)); code != http.StatusTeapot || !slices.Equal(claims.served, []string{a.ID + " file?path=/x"}) {
		t.Errorf("answer %d, forwarded %v", code, claims.served)
	}
	if err := s.Delete(ctx, "team", a.ID); err != nil || !slices.Equal(claims.deleted, []string{a.ID}) {
		t.Errorf("delete: %v, deleted %v", err, claims.deleted)
	}
}
