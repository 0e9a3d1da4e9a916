package docker

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCopyLayer copies an overlay layer as a fork's files are copied: a
// file, a whiteout (a 0/0 character device hiding a file of the image) and
// an opaque directory (hiding a directory's content) must arrive as they
// are, or the fork would see what its source deleted.
func TestCopyLayer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: whiteouts are devices and opaque directories trusted.* attributes")
	}
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "upper")
	if err := os.MkdirAll(filepath.Join(src, "home/user"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "home/user/f.txt"), []byte("before the fork"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(src, "home/gone"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "opt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(src, "opt"), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		t.Skipf("this filesystem keeps no trusted.* attributes: %v", err)
	}
	if err := copyLayer(context.Background(), src, dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "home/user/f.txt")); err != nil || string(b) != "before the fork" {
		t.Errorf("file = %q, %v", b, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(dst, "home/gone"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("whiteout: mode %o rdev %d, %v; want a 0/0 character device", st.Mode, st.Rdev, err)
	}
	buf := make([]byte, 8)
	if n, err := unix.Getxattr(filepath.Join(dst, "opt"), "trusted.overlay.opaque", buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("opaque directory: %q, %v", buf[:n], err)
	}
}
