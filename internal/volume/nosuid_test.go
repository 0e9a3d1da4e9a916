package volume

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/store/sqlite"
)

// Sandbox root is host root, so a volume is no way onto the host for
// setuid programs or device nodes: the volumes directory is 0700 however
// it was before, and each volume is a nosuid,nodev mount, new ones and
// those a restart finds (made by an older server). Needs root, as the
// server does to mount.
func TestVolumesNoSuid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount (CI runs it as root)")
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dir := filepath.Join(t.TempDir(), "volumes")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Store: st, Dir: dir, KeyFile: filepath.Join(filepath.Dir(dir), "key")}
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAll(t, s) })
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("volumes dir: %v %v, want 0700", fi.Mode(), err)
	}
	v, err := s.Create(ctx, "team", "data")
	if err != nil {
		t.Fatal(err)
	}
	assertNoSuid(t, s.Dir(v.ID))
	if fi, err := os.Stat(s.Dir(v.ID)); err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("volume root: %v %v, want drwxrwxrwt", fi.Mode(), err)
	}

	// A volume of an older server is a plain directory: a start mounts it.
	if err := unix.Unmount(s.Dir(v.ID), 0); err != nil {
		t.Fatal(err)
	}
	if s, err = New(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	assertNoSuid(t, s.Dir(v.ID))
}

func assertNoSuid(t *testing.T, dir string) {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Flags&unix.ST_NOSUID == 0 || fs.Flags&unix.ST_NODEV == 0 {
		t.Errorf("%s is mounted with flags %#x, want nosuid and nodev", dir, fs.Flags)
	}
}
