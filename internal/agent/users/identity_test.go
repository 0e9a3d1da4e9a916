package users

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// nobody is an unprivileged account for the tests, with a supplementary
// group the tests grant access through.
func nobody(t *testing.T) *User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can act as another user")
	}
	u, err := Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	u.Groups = append(u.Groups, 4242)
	return u
}

// openDir is a temporary directory anyone may enter.
func openDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // t.TempDir makes both 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDoChecksTheUsersPermissions(t *testing.T) {
	u := nobody(t)
	dir := openDir(t)
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	groupFile := filepath.Join(dir, "group-readable")
	if err := os.WriteFile(groupFile, []byte("for group 4242"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(groupFile, 0, 4242); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	closed := filepath.Join(dir, "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		op     func() error
		denied bool
	}{
		{"read a root-only file", func() error { _, err := os.ReadFile(secret); return err }, true},
		{"write a root-only file", func() error { return os.WriteFile(secret, []byte("x"), 0o600) }, true},
		{"read through a symlink", func() error { _, err := os.ReadFile(link); return err }, true},
		{"write through a symlink", func() error { return os.WriteFile(link, []byte("x"), 0o600) }, true},
		{"create in a root-only directory", func() error { return os.WriteFile(filepath.Join(closed, "f"), nil, 0o600) }, true},
		{"stat below a root-only directory", func() error { _, err := os.Stat(filepath.Join(closed, "f")); return err }, true},
		{"remove a root-owned file from a root-owned directory", func() error { return os.Remove(secret) }, true},
		{"read through a supplementary group", func() error { _, err := os.ReadFile(groupFile); return err }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := u.Do(tt.op)
			if got := errors.Is(err, fs.ErrPermission); got != tt.denied {
				t.Fatalf("err = %v, want permission denied: %v", err, tt.denied)
			}
		})
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "root only" {
		t.Fatalf("secret now %q (%v)", b, err)
	}
}

func TestDoCreatesFilesOwnedByTheUser(t *testing.T) {
	u := nobody(t)
	dir := openDir(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "new")
	if err := u.Do(func() error { return os.WriteFile(p, []byte("x"), 0o644) }); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != u.UID || st.Gid != u.GID {
		t.Fatalf("owner %d:%d, want %d:%d", st.Uid, st.Gid, u.UID, u.GID)
	}
}

// TestDoLeavesTheAgentRoot runs many Do calls while other goroutines act
// as root: no thread may keep, or lend another goroutine, the user's
// identity.
func TestDoLeavesTheAgentRoot(t *testing.T) {
	u := nobody(t)
	dir := openDir(t)
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 16 {
		wg.Go(func() {
			for range 200 {
				if err := u.Do(func() error { _, err := os.ReadFile(secret); return err }); !errors.Is(err, fs.ErrPermission) {
					errs <- errors.Join(errors.New("as nobody"), err)
					return
				}
			}
		})
		wg.Go(func() {
			for range 200 {
				if _, err := os.ReadFile(secret); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestDoPassesOnPanics(t *testing.T) {
	u := nobody(t)
	defer func() {
		if p := recover(); p != "boom" {
			t.Fatalf("recovered %v, want boom", p)
		}
	}()
	_ = u.Do(func() error { panic("boom") })
}
