package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/firewall"
	"github.com/warrenhq/warren/internal/store"
	"github.com/warrenhq/warren/internal/tlsca"
)

// filesStore adds shared files, in memory, to a store no replicas share:
// what PostgreSQL keeps in its table.
type filesStore struct {
	store.Store
	mu    sync.Mutex // guards files
	files map[string][]byte
	turn  sync.Mutex
	// racing are another replica's files, stored just before this one
	// shares its own.
	racing map[string][]byte
}

func (s *filesStore) SharedFile(_ context.Context, name string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.files[name]
	return b, ok, nil
}

func (s *filesStore) ShareFile(_ context.Context, name string, sealed []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if theirs, ok := s.racing[name]; ok {
		if _, ok := s.files[name]; !ok {
			s.files[name] = theirs
		}
	}
	if _, ok := s.files[name]; !ok {
		s.files[name] = sealed
	}
	return s.files[name], nil
}

func (s *filesStore) SwapSharedFile(ctx context.Context, name string, old, next []byte) ([]byte, error) {
	if old == nil {
		return s.ShareFile(ctx, name, next)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if bytes.Equal(s.files[name], old) {
		s.files[name] = next
	}
	return s.files[name], nil
}

func (s *filesStore) LockSharedFiles(context.Context) (func(), error) {
	s.turn.Lock()
	return s.turn.Unlock, nil
}

// caFirewall is a firewall with an egress CA of its own in the state dir,
// as the Kubernetes engine's: it makes one where it is asked to load it.
type caFirewall struct {
	firewall.Off
	loaded string // the CA LoadCA returned
}

func (f *caFirewall) LoadCA(dir string) (string, error) {
	ca, err := tlsca.LoadAuthority(dir, nil)
	if err != nil {
		return "", err
	}
	f.loaded = string(ca.CertPEM())
	return f.loaded, nil
}

// Replicas with state dirs of their own hold the same keys and CAs: the
// first one's, kept sealed in the store, the egress CA among them, loaded
// once pulled. One that made its own as another stored theirs (they
// started together) refuses to start, and holds theirs when it starts
// again.
func TestReplicasShareKeysAndCA(t *testing.T) {
	deps := testDeps(t)
	var firewalls []*caFirewall
	open := func(st store.Store, dir string, leads bool) error {
		cfg := testConfig(t)
		cfg.StateDir, cfg.TLSAddr, cfg.Domain = dir, "127.0.0.1:0", "warren.test"
		d := deps
		d.Store = st
		fw := &caFirewall{}
		firewalls = append(firewalls, fw)
		d.Firewall = fw
		d.Leadership, d.ForwardSecret = newFakeLeadership(leads), "a secret the replicas share"
		d.LostLeadership = func() { t.Error("lost the leadership") }
		srv := New(cfg, d)
		srv.leaderWait = time.Second
		err := srv.Open(t.Context())
		if err == nil {
			t.Cleanup(func() { srv.Close() })
		}
		return err
	}
	files := sharedFiles(testConfig(t))
	same := func(a, b string) {
		t.Helper()
		for _, name := range files {
			x, errX := os.ReadFile(filepath.Join(a, name))
			y, errY := os.ReadFile(filepath.Join(b, name))
			if errX != nil || errY != nil || !bytes.Equal(x, y) {
				t.Errorf("%s differs between the replicas (%v, %v)", name, errX, errY)
			}
		}
	}

	fs := &filesStore{Store: deps.Store, files: map[string][]byte{}}
	first, second := t.TempDir(), t.TempDir()
	if err := open(fs, first, true); err != nil {
		t.Fatal(err)
	}
	if err := open(fs, second, false); err != nil {
		t.Fatal(err)
	}
	same(first, second)
	if a, b := firewalls[0].loaded, firewalls[1].loaded; a == "" || a != b {
		t.Errorf("the replicas' firewalls loaded egress CAs %.60q and %.60q; want the first's in both", a, b)
	}
	for _, name := range files {
		plain, _ := os.ReadFile(filepath.Join(first, name))
		if sealed := fs.files[name]; len(sealed) == 0 || bytes.Contains(sealed, plain) {
			t.Errorf("%s is not kept sealed in the store", name)
		}
	}

	raced := &filesStore{Store: deps.Store, files: map[string][]byte{}, racing: fs.files}
	third := t.TempDir()
	if err := open(raced, third, false); err == nil {
		t.Fatal("a replica whose keys another stored first started")
	}
	if err := open(raced, third, false); err != nil {
		t.Fatalf("started again: %v", err)
	}
	same(first, third)
	if got := firewalls[len(firewalls)-1].loaded; got != firewalls[0].loaded {
		t.Errorf("the replica started again loaded the egress CA %.60q; want the first's", got)
	}
}
