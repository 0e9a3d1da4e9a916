package identity

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// clock is a settable time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newIssuer(t *testing.T, c *clock, keyFile string) *Issuer {
	t.Helper()
	i, err := New(Config{Issuer: "https://warren.example.com/", KeyFile: keyFile, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// verify checks tok against the JWKS at the time of c and returns its
// claims.
func verify(t *testing.T, set jose.JSONWebKeySet, tok string, at time.Time) (jwt.Claims, claims, string) {
	t.Helper()
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	var reg jwt.Claims
	var own claims
	if err := parsed.Claims(set, &reg, &own); err != nil {
		t.Fatalf("token does not verify against the JWKS: %v", err)
	}
	if err := reg.ValidateWithLeeway(jwt.Expected{Issuer: "https://warren.example.com", Time: at}, 0); err != nil {
		t.Fatal(err)
	}
	return reg, own, parsed.Headers[0].KeyID
}

func TestMint(t *testing.T) {
	c := &clock{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	i := newIssuer(t, c, filepath.Join(t.TempDir(), "keys.json"))
	tok, err := i.Mint(context.Background(), "sts.amazonaws.com", "isb1", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	set, _ := i.JWKS()
	reg, own, _ := verify(t, set, tok, c.t)
	if reg.Subject != "spiffe://warren.example.com/team/team-a/sandbox/isb1" || own.SandboxID != "isb1" || own.TeamID != "team-a" {
		t.Errorf("claims %+v %+v", reg, own)
	}
	if len(reg.Audience) != 1 || reg.Audience[0] != "sts.amazonaws.com" || reg.ID == "" {
		t.Errorf("aud %v, jti %q", reg.Audience, reg.ID)
	}
	if life := reg.Expiry.Time().Sub(reg.IssuedAt.Time()); life != DefaultTokenTTL || life > MaxTokenTTL {
		t.Errorf("token lives %v", life)
	}
	// aud is one string, as STSs that compare it as one expect.
	var raw map[string]any
	parsed, _ := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256})
	parsed.UnsafeClaimsWithoutVerification(&raw)
	if _, ok := raw["aud"].(string); !ok {
		t.Errorf("aud is %T", raw["aud"])
	}
	c.t = c.t.Add(DefaultTokenTTL + time.Second)
	if err := reg.ValidateWithLeeway(jwt.Expected{Time: c.t}, 0); err == nil {
		t.Error("an expired token validates")
	}
}

// TestRotation walks a key's life: published an overlap before it
// signs, signing for a rotation period, published an overlap after; a
// token signed by the previous key verifies while it lives; keys survive
// a restart.
func TestRotation(t *testing.T) {
	c := &clock{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	file := filepath.Join(t.TempDir(), "keys.json")
	i := newIssuer(t, c, file)
	ctx := context.Background()
	kid := func() string {
		tok, err := i.Mint(ctx, "a", "s", "t")
		if err != nil {
			t.Fatal(err)
		}
		set, _ := i.JWKS()
		_, _, k := verify(t, set, tok, c.t)
		return k
	}
	published := func() int { set, _ := i.JWKS(); return len(set.Keys) }
	first := kid()
	if published() != 1 {
		t.Fatalf("a new issuer publishes %d keys", published())
	}
	c.t = c.t.Add(DefaultRotateEvery - DefaultOverlap)
	if kid() != first || published() != 2 {
		t.Fatalf("a new key must be published first, not sign: %d keys", published())
	}
	old, _ := i.Mint(ctx, "a", "s", "t")
	c.t = c.t.Add(DefaultOverlap)
	second := kid()
	if second == first || published() != 2 {
		t.Fatalf("after the overlap the new key signs and the old is still published: %s, %d keys", second, published())
	}
	set, _ := i.JWKS()
	if _, _, k := verify(t, set, old, c.t.Add(-DefaultOverlap)); k != first {
		t.Error("a token of the old key no longer verifies")
	}
	c.t = c.t.Add(DefaultOverlap)
	if kid() != second || published() != 1 {
		t.Errorf("an overlap after it stopped signing the old key is dropped: %d keys", published())
	}

	restarted := newIssuer(t, c, file)
	tok, _ := restarted.Mint(ctx, "a", "s", "t")
	set, _ = restarted.JWKS()
	if _, _, k := verify(t, set, tok, c.t); k != second {
		t.Errorf("after a restart %s signs, want %s", k, second)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file %v %v", fi, err)
	}

	// Down for two rotation periods: the old key goes on signing until
	// its successor has been published for an overlap.
	c.t = c.t.Add(2 * DefaultRotateEvery)
	if kid() != second || published() != 2 {
		t.Errorf("after a long stop: %d keys", published())
	}
}

func TestConfig(t *testing.T) {
	dir := t.TempDir()
	for _, cfg := range []Config{
		{Issuer: "ftp://x"},
		{Issuer: "https://"},
		{Issuer: "https://x/?q=1"},
		{Issuer: "https://user@x"},
		{Issuer: "https://x", TokenTTL: 2 * time.Hour},
		{Issuer: "https://x", Overlap: time.Minute},
		{Issuer: "https://x", RotateEvery: time.Hour, Overlap: time.Hour},
	} {
		cfg.KeyFile = filepath.Join(dir, "k.json")
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) is no error", cfg)
		}
	}
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o600)
	if _, err := New(Config{Issuer: "https://x", KeyFile: filepath.Join(dir, "bad.json")}); err == nil {
		t.Error("a corrupt key file is no error")
	}
}

func TestHandlers(t *testing.T) {
	c := &clock{time.Now()}
	i := newIssuer(t, c, filepath.Join(t.TempDir(), "keys.json"))
	mux := http.NewServeMux()
	i.Register(mux, nil)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	res, err := http.Get(srv.URL + DiscoveryPath)
	if err != nil {
		t.Fatal(err)
	}
	var d discovery
	json.NewDecoder(res.Body).Decode(&d)
	res.Body.Close()
	if d.Issuer != "https://warren.example.com" || d.JWKSURI != "https://warren.example.com/.well-known/jwks.json" || res.Header.Get("Content-Type") != "application/json" {
		t.Errorf("discovery %+v", d)
	}
	res, err = http.Get(srv.URL + JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	var set jose.JSONWebKeySet
	json.NewDecoder(res.Body).Decode(&set)
	res.Body.Close()
	if len(set.Keys) != 1 || !set.Keys[0].IsPublic() || set.Keys[0].Algorithm != "ES256" || set.Keys[0].Use != "sig" {
		t.Errorf("jwks %+v", set)
	}
	tok, _ := i.Mint(context.Background(), "a", "s", "t")
	verify(t, set, tok, c.t)
}
