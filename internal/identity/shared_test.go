package identity

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// sharedKeys is the store replicas share their keys in, in memory.
type sharedKeys struct {
	mu   sync.Mutex // guards keys
	keys []byte
}

type replicaKeys struct {
	s   *sharedKeys
	own []byte // what this issuer last read or kept
}

func (r *replicaKeys) SwapKeys(_ context.Context, next []byte) ([]byte, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.s.keys == nil || bytes.Equal(r.s.keys, r.own) {
		r.s.keys = next
	}
	r.own = r.s.keys
	return r.s.keys, nil
}

// Two replicas' issuers starting from the same shared keys rotate to the
// same new key: the first to rotate keeps its own, the other takes it,
// and a token either signs verifies with the keys either publishes.
func TestRotationShared(t *testing.T) {
	c := &clock{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := &sharedKeys{}
	dirA, dirB := t.TempDir(), t.TempDir()
	a, err := New(Config{Issuer: "https://warren.example.com/", KeyFile: filepath.Join(dirA, "keys.json"), Now: c.now, Shared: &replicaKeys{s: s}})
	if err != nil {
		t.Fatal(err)
	}
	// The second starts on the first's keys, as the server pulls them.
	b0, _ := os.ReadFile(filepath.Join(dirA, "keys.json"))
	os.WriteFile(filepath.Join(dirB, "keys.json"), b0, 0o600)
	b, err := New(Config{Issuer: "https://warren.example.com/", KeyFile: filepath.Join(dirB, "keys.json"), Now: c.now, Shared: &replicaKeys{s: s, own: s.keys}})
	if err != nil {
		t.Fatal(err)
	}
	kids := func(i *Issuer) []string {
		set, err := i.JWKS()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, k := range set.Keys {
			ids = append(ids, k.KeyID)
		}
		slices.Sort(ids)
		return ids
	}
	if !slices.Equal(kids(a), kids(b)) {
		t.Fatalf("at the start: %v and %v", kids(a), kids(b))
	}
	c.t = c.t.Add(DefaultRotateEvery - DefaultOverlap)
	ka, kb := kids(a), kids(b)
	if len(ka) != 2 || !slices.Equal(ka, kb) {
		t.Fatalf("after the rotation the replicas publish %v and %v, want the same two keys", ka, kb)
	}
	c.t = c.t.Add(DefaultOverlap)
	ctx := context.Background()
	for _, signer := range []*Issuer{a, b} {
		tok, err := signer.Mint(ctx, "aud", "s", "t")
		if err != nil {
			t.Fatal(err)
		}
		for _, verifier := range []*Issuer{a, b} {
			set, _ := verifier.JWKS()
			verify(t, set, tok, c.t)
		}
	}
}
