// Package volume owns volumes: the team's named directory trees under one
// directory (<state-dir>/volumes, or --volumes-dir), their records in the
// store, and the signed tokens that let a client reach one volume's
// content. It does not mount volumes into sandboxes; the lifecycle manager
// and the runtime do that with what Source returns. With a size
// limit each volume is its own loop-mounted ext4 filesystem (disk.go).
// With Claims (the Kubernetes engine) a volume's content is a
// PersistentVolumeClaim of the cluster instead, and the content API is
// answered from where the claim is.
package volume

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
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
	// SizeLimitMB is the size of each volume made, in MiB: its own ext4
	// filesystem, so that a write past it fails (ENOSPC) inside a sandbox
	// as through the content API; 0 = a plain directory, no limit.
	SizeLimitMB int
	// Logger reports what New's reconciling finds; nil = discard.
	Logger *slog.Logger
	// Limits returns a team's limits, of which Create keeps MaxVolumes and
	// MaxVolumeMB (volumes of SizeLimitMB each); nil = no limits.
	Limits func(ctx context.Context, team string) (sandbox.Limits, error)
	// Claims keeps the volumes' content instead of Dir, each of
	// SizeLimitMB (0 = DefaultClaimMB); nil = directories under Dir.
	Claims Claims
}

// Claims keeps volumes' content away from this host: on Kubernetes, a
// PersistentVolumeClaim each (runtime/kubernetes.Volumes).
type Claims interface {
	// CreateClaim makes volume id's storage, of sizeMB.
	CreateClaim(ctx context.Context, id string, sizeMB int) error
	// DeleteClaim deletes it, and with it the content; a missing one is
	// no error.
	DeleteClaim(ctx context.Context, id string) error
	// ClaimName is what a sandbox's mount of volume id names
	// (sandbox.Mount.Source).
	ClaimName(id string) string
	// ServeContent answers a content API request for volume id, whose
	// token was checked, from where its content is (ContentHandler).
	ServeContent(w http.ResponseWriter, r *http.Request, id string) error
	// UsedBytes is the size of the volume's files.
	UsedBytes(ctx context.Context, id string) (int64, error)
}

// DefaultClaimMB is the size of a volume's claim when no size is set: a
// claim must request one.
const DefaultClaimMB = 1024

// minSizeMB is the smallest limit: below it ext4's own metadata would be
// most of the filesystem.
const minSizeMB = 8

// Service creates, finds and deletes volumes and signs their tokens.
type Service struct {
	st  sandbox.VolumeStore
	dir string
	key []byte
	now func() time.Time
	// sizeMB is Config.SizeLimitMB; 0 = none.
	sizeMB int
	log    *slog.Logger
	limits func(ctx context.Context, team string) (sandbox.Limits, error) // nil = none
	// creating makes a team's count of volumes and its new one's record
	// one step, so that creates at once cannot pass its limit together.
	creating sync.Mutex

	warnNoMount sync.Once // bindDir's warning
	claims      Claims    // nil = directories under dir
}

// New opens the volumes directory and the signing key and reconciles the
// directory with the store, which is the source of truth: each volume's
// filesystem is mounted again (after a reboot; a server killed with -9
// leaves them mounted), and content whose record is gone (a delete cut
// short) is removed. It must run before sandboxes that mount volumes are
// started, so that they bind the mounted filesystem, not the directory
// under it.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SizeLimitMB < 0 || (cfg.SizeLimitMB > 0 && cfg.SizeLimitMB < minSizeMB) {
		return nil, fmt.Errorf("--volume-size-mb must be 0 (no limit) or at least %d", minSizeMB)
	}
	if cfg.Claims != nil && cfg.SizeLimitMB == 0 {
		cfg.SizeLimitMB = DefaultClaimMB
	}
	if cfg.SizeLimitMB > 0 && cfg.Claims == nil {
		if err := CheckLoops("--volume-size-mb gives each volume its own ext4 filesystem on a loop device (or run without --volume-size-mb)"); err != nil {
			return nil, err
		}
	}
	// Only the server (and the engine, as root) goes in: volumes hold
	// what sandboxes' root made, for a local user to find.
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("volumes dir: %w", err)
	}
	if err := os.Chmod(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("volumes dir: %w", err)
	}
	key, err := loadKey(cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	s := &Service{st: cfg.Store, dir: cfg.Dir, key: key, now: cfg.Now, sizeMB: cfg.SizeLimitMB, log: logkey.For(cfg.Logger, "volume"),
		limits: cfg.Limits, claims: cfg.Claims}
	if s.claims != nil {
		return s, nil // the cluster keeps the claims
	}
	if err := s.reconcile(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Service) reconcile(ctx context.Context) error {
	vols, err := s.st.ListAllVolumes(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, v := range vols {
		known[v.ID] = true
		switch _, err := os.Stat(s.image(v.ID)); {
		case err == nil:
			if err := MountImage(s.image(v.ID), s.Dir(v.ID)); err != nil {
				return fmt.Errorf("volume %s (%s of team %s): %w", v.ID, v.Name, v.TeamID, err)
			}
		case !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("volume %s: %w", v.ID, err)
		default:
			if s.sizeMB > 0 {
				s.log.Warn("volume was made without --volume-size-mb and keeps no size limit", logkey.Volume, v.ID, "name", v.Name, logkey.Team, v.TeamID)
			}
			if err := s.bindDir(v.ID); err != nil {
				return fmt.Errorf("volume %s (%s of team %s): %w", v.ID, v.Name, v.TeamID, err)
			}
		}
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("volumes dir: %w", err)
	}
	for _, e := range entries {
		id := strings.TrimSuffix(e.Name(), imageExt)
		// Only what Warren made: --volumes-dir may be shared with others.
		if known[id] || !isVolumeID(id) || (e.IsDir() == (id != e.Name())) {
			continue
		}
		s.log.Info("removing the content of a deleted volume", logkey.Volume, id)
		if err := s.removeContent(ctx, id); err != nil {
			return err
		}
	}
	return nil
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
	s.creating.Lock()
	defer s.creating.Unlock()
	if err := s.checkLimits(ctx, team); err != nil {
		return sandbox.Volume{}, err
	}
	v := sandbox.Volume{ID: sandbox.NewVolumeID(), TeamID: team, Name: name, CreatedAt: s.now().UTC()}
	if err := s.makeContent(ctx, v.ID); err != nil {
		s.removeContent(context.WithoutCancel(ctx), v.ID)
		return sandbox.Volume{}, err
	}
	if err := s.st.PutVolume(ctx, v); err != nil {
		s.removeContent(context.WithoutCancel(ctx), v.ID)
		return sandbox.Volume{}, err
	}
	return v, nil
}

// checkLimits refuses one more volume to a team at its limits: the
// number of its volumes, and their size in all (each SizeLimitMB; with
// no size limit a volume has none to count).
func (s *Service) checkLimits(ctx context.Context, team string) error {
	if s.limits == nil {
		return nil
	}
	l, err := s.limits(ctx, team)
	if err != nil {
		return err
	}
	if l.MaxVolumes == 0 && (l.MaxVolumeMB == 0 || s.sizeMB == 0) {
		return nil
	}
	vs, err := s.st.ListVolumes(ctx, team)
	if err != nil {
		return err
	}
	if n := len(vs); l.MaxVolumes > 0 && n >= l.MaxVolumes {
		return sandbox.Limited(fmt.Sprintf("team '%s' has %d of %d volumes", team, n, l.MaxVolumes), sandbox.QuotaRetry)
	}
	if used := len(vs) * s.sizeMB; l.MaxVolumeMB > 0 && s.sizeMB > 0 && used+s.sizeMB > l.MaxVolumeMB {
		return sandbox.Limited(fmt.Sprintf("team '%s' has %d of %d MiB of volumes, and a volume takes %d", team, used, l.MaxVolumeMB, s.sizeMB), sandbox.QuotaRetry)
	}
	return nil
}

// makeContent makes a volume's empty tree: a claim, a directory, or with
// a size limit a filesystem mounted on it.
func (s *Service) makeContent(ctx context.Context, id string) error {
	if s.claims != nil {
		return s.claims.CreateClaim(ctx, id, s.sizeMB)
	}
	if s.sizeMB > 0 {
		if err := MakeImage(s.image(id), s.sizeMB); err != nil {
			return err
		}
		return MountImage(s.image(id), s.Dir(id))
	}
	if err := os.Mkdir(s.Dir(id), 0o777|os.ModeSticky); err != nil {
		return fmt.Errorf("create volume dir: %w", err)
	}
	// The umask trims the mode Mkdir is given; sandbox users of any uid
	// share the tree, as /tmp's users do (see docs/volumes.md).
	if err := os.Chmod(s.Dir(id), 0o777|os.ModeSticky); err != nil {
		return fmt.Errorf("create volume dir: %w", err)
	}
	return s.bindDir(id)
}

// bindDir makes a plain volume's directory a nosuid,nodev mount of its
// own (bindNoSuid); where the server may not mount, it warns once and
// leaves the directory as it is, reachable only through the 0700
// volumes directory.
func (s *Service) bindDir(id string) error {
	if _, err := os.Lstat(s.Dir(id)); errors.Is(err, os.ErrNotExist) {
		return nil // its content is gone; Delete still works
	}
	err := bindNoSuid(s.Dir(id))
	if errors.Is(err, errNoMount) {
		s.warnNoMount.Do(func() {
			s.log.Warn("volumes are not mounted nosuid,nodev: this server may not mount (run it as root); " +
				"setuid programs made in them by sandboxes' root keep their bit on the host, behind the 0700 volumes directory")
		})
		return nil
	}
	return err
}

// removeContent removes a volume's claim, or its tree and filesystem,
// whichever exist.
func (s *Service) removeContent(ctx context.Context, id string) error {
	if s.claims != nil {
		return s.claims.DeleteClaim(ctx, id)
	}
	if err := Unmount(s.Dir(id)); err != nil {
		return err
	}
	if err := os.RemoveAll(s.Dir(id)); err != nil {
		return fmt.Errorf("remove volume dir: %w", err)
	}
	if err := os.Remove(s.image(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove volume image: %w", err)
	}
	return nil
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
	return s.removeContent(ctx, v.ID)
}

// isVolumeID tells whether s has the shape of sandbox.NewVolumeID's IDs.
func isVolumeID(s string) bool {
	if len(s) != 21 || s[0] != 'v' {
		return false
	}
	for _, c := range s[1:] {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// Dir returns the directory of a volume's content (without Claims).
func (s *Service) Dir(id string) string { return filepath.Join(s.dir, id) }

// Source is what a sandbox's mount of volume id names: its directory, or
// with Claims its claim.
func (s *Service) Source(id string) string {
	if s.claims != nil {
		return s.claims.ClaimName(id)
	}
	return s.Dir(id)
}

// image returns the path of a volume's filesystem image.
func (s *Service) image(id string) string { return filepath.Join(s.dir, id+imageExt) }

// Usage reports how much a volume holds: from its filesystem when it has
// a size limit, else by adding up its files; with Claims, its files and
// its claim's size.
func (s *Service) Usage(ctx context.Context, id string) (Usage, error) {
	if s.claims != nil {
		used, err := s.claims.UsedBytes(ctx, id)
		return Usage{UsedBytes: used, LimitBytes: int64(s.sizeMB) << 20}, err
	}
	if _, err := os.Stat(s.image(id)); err == nil {
		limit, err := imageLimit(s.image(id))
		if err != nil {
			return Usage{}, err
		}
		used, err := statUsage(s.Dir(id))
		return Usage{UsedBytes: used, LimitBytes: limit}, err
	}
	root, err := os.OpenRoot(s.Dir(id))
	if err != nil {
		return Usage{}, fmt.Errorf("volume usage: %w", err)
	}
	defer root.Close()
	n, err := FilesBytes(root)
	return Usage{UsedBytes: n}, err
}

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
