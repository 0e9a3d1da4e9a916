package files

import (
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/warrenhq/warren/internal/warrentest"
)

// asNobody prepares a fixture whose directory belongs to the unprivileged
// user nobody, beside a root-only secret file.
func asNobody(t *testing.T) (f *fixture, secret string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the agent acts as another user, which only root may do")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user 'nobody' on this system")
	}
	f = newFixture(t)
	warrentest.GiveDir(t, f.dir, nobody)
	secret = filepath.Join(filepath.Dir(f.dir), "secret")
	if err := os.WriteFile(secret, []byte("root only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f, secret
}

// TestFilesActAsTheUser: a user reaches through the files API only what
// the user could reach in a shell, symlinks included; root reaches all.
func TestFilesActAsTheUser(t *testing.T) {
	f, secret := asNobody(t)
	link := filepath.Join(f.dir, "link")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	rootDir := filepath.Join(f.dir, "root-dir")
	if err := os.Symlink(filepath.Dir(secret), rootDir); err != nil {
		t.Fatal(err)
	}
	octet := []string{"Content-Type", "application/octet-stream"}
	tests := []struct {
		name, method, path, user string
		status                   int
	}{
		{"read a root-only file", http.MethodGet, secret, "nobody", http.StatusForbidden},
		{"read a root-only file through a symlink", http.MethodGet, link, "nobody", http.StatusForbidden},
		{"write a root-only file", http.MethodPost, secret, "nobody", http.StatusForbidden},
		{"write a root-only file through a symlink", http.MethodPost, link, "nobody", http.StatusForbidden},
		{"create in root's directory through a symlink", http.MethodPost, filepath.Join(rootDir, "new", "file"), "nobody", http.StatusForbidden},
		{"root reads it", http.MethodGet, secret, "root", http.StatusOK},
		{"root reads it through the symlink", http.MethodGet, link, "root", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := f.fileURL("path", tt.path, "username", tt.user)
			r := do(t, newRequest(t, tt.method, url, strings.NewReader("overwritten\n"), octet...))
			if tt.status != http.StatusOK {
				wantError(t, r, tt.status, "")
			} else if r.status != http.StatusOK || r.body != "root only\n" {
				t.Fatalf("status %d body %q", r.status, r.body)
			}
			if got := warrentest.ReadFile(t, secret); got != "root only\n" {
				t.Fatalf("secret is now %q", got)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(secret), "new")); !os.IsNotExist(err) {
		t.Fatalf("a refused upload created its parent: %v", err)
	}
}

// TestFilesUserKeepsTheirFiles: what a user may do works as before, and a
// file the user creates is theirs.
func TestFilesUserKeepsTheirFiles(t *testing.T) {
	f, _ := asNobody(t)
	nobody, _ := user.Lookup("nobody")
	dst := filepath.Join(f.dir, "sub", "mine.txt")
	decodeUploaded(t, do(t, newRequest(t, http.MethodPost, f.fileURL("path", dst, "username", "nobody"), strings.NewReader("mine"), "Content-Type", "application/octet-stream", "X-Metadata-Kind", "note")))
	r := do(t, newRequest(t, http.MethodGet, f.fileURL("path", dst, "username", "nobody"), nil))
	if r.status != http.StatusOK || r.body != "mine" {
		t.Fatalf("status %d body %q", r.status, r.body)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; itoa(uid) != nobody.Uid {
		t.Fatalf("uid %d, want nobody's %s", uid, nobody.Uid)
	}
}

// TestFilesMakesMissingParents: as E2B's agent does, a write makes the
// missing parents of its file for the user, also in root's directories
// (the SDKs' suites write "/0/file" as user); a write refused after that
// leaves none of them.
func TestFilesMakesMissingParents(t *testing.T) {
	f, secret := asNobody(t)
	nobody, _ := user.Lookup("nobody")
	root := filepath.Dir(secret)
	dst := filepath.Join(root, "made", "deeper", "file")
	decodeUploaded(t, do(t, newRequest(t, http.MethodPost, f.fileURL("path", dst, "username", "nobody"), strings.NewReader("x"), "Content-Type", "application/octet-stream")))
	for _, p := range []string{filepath.Join(root, "made"), filepath.Dir(dst), dst} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; itoa(uid) != nobody.Uid {
			t.Fatalf("%s: uid %d, want nobody's %s", p, uid, nobody.Uid)
		}
	}

	closed := filepath.Join(root, "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	r := do(t, newRequest(t, http.MethodPost, f.fileURL("path", filepath.Join(closed, "new", "file"), "username", "nobody"), strings.NewReader("x"), "Content-Type", "application/octet-stream"))
	wantError(t, r, http.StatusForbidden, "")
	if _, err := os.Stat(filepath.Join(closed, "new")); !os.IsNotExist(err) {
		t.Fatalf("a refused upload left the parent it made: %v", err)
	}
}

// TestFilesSpecialPaths: files that are no regular files, or refuse to be
// read or created, get a 4xx naming the problem, never a 500 or a hang.
func TestFilesSpecialPaths(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: /proc/self/mem of the agent is only root's")
	}
	f := newFixture(t)
	fifo := filepath.Join(f.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, path string
		status             int
		msg                string
	}{
		{"read /proc/self/mem", http.MethodGet, "/proc/self/mem", http.StatusBadRequest, "path '/proc/self/mem' cannot be read: input/output error"},
		{"read a FIFO without a writer", http.MethodGet, fifo, http.StatusBadRequest, "path '" + fifo + "' is not a regular file"},
		{"write a FIFO without a reader", http.MethodPost, fifo, http.StatusBadRequest, "path '" + fifo + "' is not a regular file"},
		{"read a device", http.MethodGet, "/dev/zero", http.StatusBadRequest, "path '/dev/zero' is not a regular file"},
		// Linux says ENOENT (400), gVisor EPERM (403): either is the client's.
		{"create in procfs", http.MethodPost, "/proc/warren-test-file", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, newRequest(t, tt.method, f.fileURL("path", tt.path), strings.NewReader("x"), "Content-Type", "application/octet-stream"))
			if tt.status == 0 && (r.status == http.StatusBadRequest || r.status == http.StatusForbidden) {
				tt.status = r.status
			}
			wantError(t, r, tt.status, tt.msg)
		})
	}
	// A pseudo-file that reads fine is served whole, though its size is 0.
	r := do(t, newRequest(t, http.MethodGet, f.fileURL("path", "/proc/self/status"), nil))
	if r.status != http.StatusOK || !strings.Contains(r.body, "Name:") {
		t.Fatalf("/proc/self/status: status %d body %q", r.status, r.body)
	}
}
