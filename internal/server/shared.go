package server

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/warrenhq/warren/internal/identity"
	"github.com/warrenhq/warren/internal/secretfile"
	"github.com/warrenhq/warren/internal/store"
)

// The replicas of one control plane hold the same keys and CAs: a
// sandbox's workload tokens, volume tokens, sealed secrets, the
// certificates it is shown and those its egress gateway intercepts TLS
// with verify whichever replica made them. The state
// dir's files that hold them are kept in the shared store, sealed with a
// key derived from the secret the replicas share (the node agents'
// token): a replica takes the store's before it loads them (pullShared),
// and stores those it made when the store had none (pushShared).

// sharedFiles are the files of the state dir the replicas share; the
// secrets' key only when it is the state dir's own (Config.SecretsKeyFile
// unset). A file a replica does not have (the egress CA without an
// egressCA firewall) is neither pushed nor pulled.
func sharedFiles(cfg Config) []string {
	files := []string{keysFile, "volume-token.key", filepath.Join("tls", "ca.pem"), filepath.Join("tls", "ca-key.pem"),
		filepath.Join(egressCADir, "ca.pem"), filepath.Join(egressCADir, "ca-key.pem")}
	if cfg.SecretsKeyFile == "" {
		files = append(files, "secrets.key")
	}
	return files
}

// egressCADir is the state dir's directory of an egressCA firewall's CA.
const egressCADir = "egress-ca"

// egressCA is a firewall that intercepts TLS with a CA of its own in the
// state dir (the Kubernetes engine's node gateways, which get its key):
// the replicas share it, so that a sandbox made under one leader trusts
// the next one's gateways; Open loads it once the shared files are
// pulled, and every sandbox trusts it (Deps.CABundle).
type egressCA interface {
	// LoadCA loads the CA in dir, making one there if it holds none, and
	// returns its certificate (PEM).
	LoadCA(dir string) (certPEM string, err error)
}

// loadEgressCA is the CA bundle sandboxes trust: an egressCA firewall's
// CA, loaded from the state dir, or Deps.CABundle.
func loadEgressCA(cfg Config, deps Deps) (string, error) {
	fw, ok := deps.Firewall.(egressCA)
	if !ok {
		return deps.CABundle, nil
	}
	return fw.LoadCA(filepath.Join(cfg.StateDir, egressCADir))
}

// sharedState is how a replica keeps its shared files in the store.
type sharedState struct {
	st    store.SharedFiles
	dir   string
	files []string
	aead  cipher.AEAD
	// unlock ends this replica's turn (LockSharedFiles), after push;
	// set by the Server.
	unlock func()

	mu   sync.Mutex        // guards seen
	seen map[string][]byte // the sealed files last read or kept, by name
}

// keysFile is the workload identity's key file, which changes as its keys
// rotate: through identityKeys.
const keysFile = "oidc-keys.json"

// newSharedState returns the sharing of cfg's state dir through st, nil
// when st shares no files (a store of one server's).
func newSharedState(cfg Config, st store.Store, secret string) (*sharedState, error) {
	fs, ok := st.(store.SharedFiles)
	if !ok {
		return nil, nil
	}
	key := sha256.Sum256([]byte("warren: the replicas' shared state files\x00" + secret))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sharedState{st: fs, dir: cfg.StateDir, files: sharedFiles(cfg), aead: aead, seen: map[string][]byte{}}, nil
}

func (s *sharedState) seal(name string, plain []byte) []byte {
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, plain, []byte(name))
}

func (s *sharedState) open(name string, sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, fmt.Errorf("shared file %s: too short", name)
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(name))
	if err != nil {
		return nil, fmt.Errorf("shared file %s: cannot unseal it (the replicas' node token changed?): %w", name, err)
	}
	return plain, nil
}

// pull writes the files the store keeps into the state dir, over this
// replica's own.
func (s *sharedState) pull(ctx context.Context) error {
	for _, name := range s.files {
		sealed, ok, err := s.st.SharedFile(ctx, name)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		plain, err := s.open(name, sealed)
		if err != nil {
			return err
		}
		s.saw(name, sealed)
		if err := writeShared(filepath.Join(s.dir, name), plain); err != nil {
			return err
		}
	}
	return nil
}

// push stores the files of the state dir the store lacks. A file another
// replica stored meanwhile (they started together, each making its own)
// is written over this one's, and an error: this replica loaded its own,
// and must start again to load the store's.
func (s *sharedState) push(ctx context.Context) error {
	defer s.unlock()
	var raced []string
	for _, name := range s.files {
		plain, err := os.ReadFile(filepath.Join(s.dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		kept, err := s.st.ShareFile(ctx, name, s.seal(name, plain))
		if err != nil {
			return err
		}
		theirs, err := s.open(name, kept)
		if err != nil {
			return err
		}
		s.saw(name, kept)
		if !bytes.Equal(theirs, plain) {
			raced = append(raced, name)
			if err := writeShared(filepath.Join(s.dir, name), theirs); err != nil {
				return err
			}
		}
	}
	if len(raced) > 0 {
		return fmt.Errorf("another replica stored its %v as this one made its own (they started together): starting again loads theirs", raced)
	}
	return nil
}

func (s *sharedState) saw(name string, sealed []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[name] = sealed
}

// identityKeys shares the workload identity's rotations: a replica's
// rotation is kept unless another replica's came first, which it takes.
type identityKeys struct{ s *sharedState }

var _ identity.SharedKeys = identityKeys{}

func (k identityKeys) SwapKeys(ctx context.Context, next []byte) ([]byte, error) {
	s := k.s
	s.mu.Lock()
	old := s.seen[keysFile]
	s.mu.Unlock()
	kept, err := s.st.SwapSharedFile(ctx, keysFile, old, s.seal(keysFile, next))
	if err != nil {
		return nil, err
	}
	s.saw(keysFile, kept)
	return s.open(keysFile, kept)
}

// writeShared writes a shared file as its owner made it (readable by the
// server alone), unless it holds that already.
func writeShared(path string, b []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return nil
	}
	return secretfile.Write(path, b)
}
