package template

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// uploads keeps build context archives by team and files hash, and the
// short-lived tickets that let a client PUT one without its API key (the
// SDK sends no key to the upload URL). Tickets live in memory: one lost in
// a restart just makes the client ask again.
type uploads struct {
	dir     string // <state>/template-files
	maxSize int64
	ttl     time.Duration

	mu      sync.Mutex // guards tickets
	tickets map[string]ticket
}

type ticket struct {
	team, hash string
	expires    time.Time
}

func newUploads(dir string, maxSize int64) (*uploads, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create upload directory: %w", err)
	}
	return &uploads{dir: dir, maxSize: maxSize, ttl: time.Hour, tickets: map[string]ticket{}}, nil
}

// validHash reports whether h is a hex SHA-256, the SDK's files hash.
func validHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func checkHash(h string) error {
	if !validHash(h) {
		return sandbox.Errorf(sandbox.KindInvalid, "invalid files hash '%s': expected 64 lowercase hex digits (SHA-256)", h)
	}
	return nil
}

// path is where a team's archive with hash lives. team and hash are
// validated IDs, never client paths.
func (u *uploads) path(team, hash string) string {
	return filepath.Join(u.teamDir(team), hash+".tar")
}

// teamDir is a team's directory: named after a hash of the team ID, so no
// ID can make a path of it.
func (u *uploads) teamDir(team string) string {
	sum := sha256.Sum256([]byte(team))
	return filepath.Join(u.dir, hex.EncodeToString(sum[:8]))
}

func (u *uploads) present(team, hash string) bool {
	_, err := os.Stat(u.path(team, hash))
	return err == nil
}

// issue returns a ticket token for uploading the archive team/hash.
func (u *uploads) issue(team, hash string) string {
	tok := sandbox.NewToken()
	now := time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, t := range u.tickets {
		if now.After(t.expires) {
			delete(u.tickets, k)
		}
	}
	u.tickets[tok] = ticket{team: team, hash: hash, expires: now.Add(u.ttl)}
	return tok
}

// receive stores the body of an upload for token. size is the request's
// Content-Length, which must be known; a body of another length is
// refused, and so is an archive Extract would refuse. The file appears
// under its final name only once complete and checked.
func (u *uploads) receive(token string, size int64, body io.Reader) error {
	u.mu.Lock()
	t, ok := u.tickets[token]
	u.mu.Unlock()
	if !ok || time.Now().After(t.expires) {
		return sandbox.Errorf(sandbox.KindNotFound, "upload URL is unknown or expired; request a new one")
	}
	if size < 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "Content-Length is required")
	}
	if size > u.maxSize {
		return sandbox.Errorf(sandbox.KindInvalid, "upload of %d bytes is larger than the limit of %d bytes", size, u.maxSize)
	}
	dir := u.teamDir(t.team)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, io.LimitReader(body, size+1))
	if err != nil {
		tmp.Close()
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return sandbox.Errorf(sandbox.KindInvalid, "upload body is shorter than its Content-Length of %d bytes", size)
		}
		return sandbox.Wrap(sandbox.KindInvalid, err, "upload failed")
	}
	if n != size {
		tmp.Close()
		return sandbox.Errorf(sandbox.KindInvalid, "upload body has %d bytes, Content-Length said %d", n, size)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		tmp.Close()
		return err
	}
	if err := CheckArchive(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), u.path(t.team, t.hash)); err != nil {
		return err
	}
	u.mu.Lock()
	delete(u.tickets, token)
	u.mu.Unlock()
	return nil
}

// open opens a stored archive.
func (u *uploads) open(team, hash string) (*os.File, error) {
	f, err := os.Open(u.path(team, hash))
	if errors.Is(err, os.ErrNotExist) {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "the files with hash %s were not uploaded", hash)
	}
	return f, err
}
