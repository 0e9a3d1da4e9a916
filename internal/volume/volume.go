// Package volume owns volumes: the team's named directory trees under one
// directory (<state-dir>/volumes, or --volumes-dir), their records in the
// store, and the signed tokens that let a client reach one volume's
// content. It does not mount volumes into sandboxes; the lifecycle manager
// and the runtime do that with the directory Dir returns.
package volume

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// TokenTTL is how long a volume token issued by Create or Get is good for.
const TokenTTL = 24 * time.Hour

// Config configures a Service.
type Config struct {
	Store sandbox.VolumeStore // required
	// Dir holds one directory per volume, named by its ID; required.
	Dir string
	// KeyFile holds the server's token signing key, made on first use;
	// required.
	KeyFile string
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// SizeLimitMB bounds what the content API lets a volume hold, in MiB,
	// by counting its files on each write; 0 = no limit. Writes through a
	// sandbox's mount are not counted (see docs/volumes.md).
	SizeLimitMB int
}

// Service creates, finds and deletes volumes and signs their tokens.
type Service struct {
	st  sandbox.VolumeStore
	dir string
	key []byte
	now func() time.Time
	// limit is Config.SizeLimitMB in bytes; 0 = none.
	limit int64
}

// New opens the volumes directory and the signing key.
func New(cfg Config) (*Service, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SizeLimitMB < 0 {
		return nil, fmt.Errorf("--volume-size-mb must not be negative (0: no limit)")
	}
	if err := os.MkdirAll(cfg.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("volumes dir: %w", err)
	}
	key, err := loadKey(cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	return &Service{st: cfg.Store, dir: cfg.Dir, key: key, now: cfg.Now, limit: int64(cfg.SizeLimitMB) << 20}, nil
}

// loadKey reads the signing key, or makes one: a restart must keep the
// tokens it issued valid.
func loadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(b) >= 32 {
		return b, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("volume token key: %w", err)
	}
	b = make([]byte, 32)
	rand.Read(b)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("volume token key: %w", err)
	}
	return b, nil
}

// Create makes a team's volume and its empty directory.
func (s *Service) Create(ctx context.Context, team, name string) (sandbox.Volume, error) {
	if err := sandbox.ValidateVolumeName(name); err != nil {
		return sandbox.Volume{}, err
	}
	v := sandbox.Volume{ID: sandbox.NewVolumeID(), TeamID: team, Name: name, CreatedAt: s.now().UTC()}
	if err := os.Mkdir(s.Dir(v.ID), 0o777|os.ModeSticky); err != nil {
		return sandbox.Volume{}, fmt.Errorf("create volume dir: %w", err)
	}
	// The umask trims the mode Mkdir is given; sandbox users of any uid
	// share the tree, as /tmp's users do (see docs/volumes.md).
	if err := os.Chmod(s.Dir(v.ID), 0o777|os.ModeSticky); err != nil {
		os.Remove(s.Dir(v.ID))
		return sandbox.Volume{}, fmt.Errorf("create volume dir: %w", err)
	}
	if err := s.st.PutVolume(ctx, v); err != nil {
		os.Remove(s.Dir(v.ID))
		return sandbox.Volume{}, err
	}
	return v, nil
}

// Get returns a team's volume; another team's is not found.
func (s *Service) Get(ctx context.Context, team, id string) (sandbox.Volume, error) {
	v, err := s.st.GetVolume(ctx, id)
	if err == nil && v.TeamID != team {
		err = sandbox.Errorf(sandbox.KindNotFound, "volume not found")
	}
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return sandbox.Volume{}, sandbox.Errorf(sandbox.KindNotFound, "volume %q not found", id)
	}
	return v, err
}

// List returns a team's volumes, oldest first.
func (s *Service) List(ctx context.Context, team string) ([]sandbox.Volume, error) {
	return s.st.ListVolumes(ctx, team)
}

// Delete removes a team's volume, its content and so every token of it.
func (s *Service) Delete(ctx context.Context, team, id string) error {
	v, err := s.Get(ctx, team, id)
	if err != nil {
		return err
	}
	if err := s.st.DeleteVolume(ctx, v.ID); err != nil {
		return err
	}
	if err := os.RemoveAll(s.Dir(v.ID)); err != nil {
		return fmt.Errorf("remove volume dir: %w", err)
	}
	return nil
}

// Dir returns the directory of a volume's content.
func (s *Service) Dir(id string) string { return filepath.Join(s.dir, id) }

// Token signs a token for v's content, good for TokenTTL.
func (s *Service) Token(v sandbox.Volume) string {
	payload := v.ID + "." + v.TeamID + "." + strconv.FormatInt(s.now().Add(TokenTTL).Unix(), 10)
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(payload)) + "." + enc.EncodeToString(s.sign(payload))
}

func (s *Service) sign(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("warren-volume-token\x00" + payload))
	return m.Sum(nil)
}

// Verify checks that token grants volume id and returns the volume. A
// missing or malformed token is unauthenticated; a good signature for
// another volume, an expired token or a deleted volume is forbidden.
func (s *Service) Verify(ctx context.Context, id, token string) (sandbox.Volume, error) {
	enc := base64.RawURLEncoding
	p, sig, ok := strings.Cut(token, ".")
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(sig)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(mac, s.sign(string(payload))) {
		return sandbox.Volume{}, sandbox.Errorf(sandbox.KindUnauthenticated, "invalid volume token")
	}
	parts := strings.Split(string(payload), ".")
	if len(parts) != 3 {
		return sandbox.Volume{}, sandbox.Errorf(sandbox.KindUnauthenticated, "invalid volume token")
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return sandbox.Volume{}, sandbox.Errorf(sandbox.KindUnauthenticated, "invalid volume token")
	}
	if parts[0] != id {
		return sandbox.Volume{}, sandbox.Errorf(sandbox.KindForbidden, "token is not for volume %q", id)
	}
	if s.now().Unix() >= exp {
		return sandbox.Volume{}, sandbox.Errorf(sandbox.KindForbidden, "volume token expired")
	}
	v, err := s.Get(ctx, parts[1], id)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return sandbox.Volume{}, sandbox.Errorf(sandbox.KindForbidden, "volume %q no longer exists", id)
	}
	return v, err
}
