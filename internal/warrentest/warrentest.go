// Package warrentest holds what the tests of several packages do, as
// Tailscale's tstest does: skipping without root, a temporary directory
// under its real path, files written and read that fail the test instead
// of returning errors, a directory handed to another user. Only tests
// import it; it imports nothing of Warren's, so that any package's tests
// can. What one package's tests alone do stays in its helpers_test.go.
package warrentest

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

// RequireRoot skips the test unless it runs as root; why says what needs
// root.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: " + why)
	}
}

// TempDir is t.TempDir with symbolic links resolved, so that the paths a
// test compares with what it is answered are the real ones.
func TempDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// WriteFile writes content to path with mode 0644 whatever the umask,
// making its directory if missing.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ReadFile returns the content of path.
func ReadFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// GiveDir hands dir, made by TempDir, to u and opens its parent, so that
// u can work there: t.TempDir makes both private to root.
func GiveDir(t testing.TB, dir string, u *user.User) {
	t.Helper()
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
}
