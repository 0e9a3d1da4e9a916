package volume

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/warrenhq/warren/internal/store/sqlite"
)

// These tests make loop-mounted filesystems: they need root and loop
// devices (CI's machine has both) and fail without them, as the server
// would refuse --volume-size-mb.

// newLimited returns a Service whose volumes are sizeMB filesystems under
// a temporary directory; the test's cleanup deletes what is left.
func newLimited(t *testing.T, sizeMB int) *Service {
	t.Helper()
	st, err := sqlite.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := Config{Store: st, Dir: filepath.Join(dir, "volumes"), KeyFile: filepath.Join(dir, "key"), SizeLimitMB: sizeMB}
	s, err := New(context.Background(), cfg)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		vols, _ := st.ListAllVolumes(context.Background())
		for _, v := range vols {
			s.Delete(context.Background(), v.TeamID, v.ID)
		}
		st.Close()
	})
	return s
}

// A sandbox writes through its mount straight to the volume's
// filesystem: this test writes to the directory as the sandbox would.
func TestDiskLimitHoldsForEveryWriter(t *testing.T) {
	s := newLimited(t, 16)
	v, err := s.Create(context.Background(), "team", "data")
	if err != nil {
		t.Fatal(err)
	}
	if on, err := IsMountPoint(s.Dir(v.ID)); !on || err != nil {
		t.Fatalf("volume dir is not a mount point: %v %v", on, err)
	}
	fi, err := os.Stat(s.Dir(v.ID))
	if err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
		t.Fatalf("volume root: %v %v, want drwxrwxrwt", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(s.Dir(v.ID)); len(entries) != 0 {
		t.Errorf("new volume holds %v, want nothing (no lost+found)", entries)
	}
	u, err := s.Usage(t.Context(), v.ID)
	if err != nil || u.LimitBytes != 16<<20 || u.UsedBytes > 1<<20 {
		t.Fatalf("empty 16 MiB volume: %+v %v, want a 16 MiB limit, under 1 MiB used", u, err)
	}

	f, err := os.Create(filepath.Join(s.Dir(v.ID), "big"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	var wrote int
	for wrote = 0; wrote < 64; wrote++ {
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing 64 MiB into a 16 MiB volume: %v after %d MiB, want ENOSPC", err, wrote)
	}
	if wrote < 16 {
		t.Errorf("only %d MiB fit in a 16 MiB volume", wrote)
	}
	if u, err := s.Usage(t.Context(), v.ID); err != nil || u.UsedBytes < 16<<20 {
		t.Errorf("full volume's usage: %+v %v", u, err)
	}
}

// The store is the source of truth: New mounts each volume's filesystem
// again (after a reboot, say), with its content, and removes the content
// of volumes whose record is gone; Delete leaves no image, mount or loop
// device.
func TestDiskReconcile(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir := t.TempDir()
	cfg := Config{Store: st, Dir: filepath.Join(dir, "volumes"), KeyFile: filepath.Join(dir, "key"), SizeLimitMB: minSizeMB}
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Create(ctx, "team", "kept")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Delete(ctx, "team", v.ID)
	os.WriteFile(filepath.Join(s.Dir(v.ID), "f"), []byte("kept"), 0o644)
	orphan, err := s.Create(ctx, "team", "orphan")
	if err != nil {
		t.Fatal(err)
	}
	st.DeleteVolume(ctx, orphan.ID) // a delete cut short after the store's part
	// Not Warren's: kept whatever their names look like.
	for _, p := range []string{"venv", "v" + strings.Repeat("x", 20) + imageExt} { // a directory named as an image
		if err := os.Mkdir(filepath.Join(cfg.Dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(cfg.Dir, "v"+strings.Repeat("y", 20)), nil, 0o644) // a file named as a volume's directory
	for _, id := range []string{v.ID, orphan.ID} {
		if err := Unmount(s.Dir(id)); err != nil {
			t.Fatal(err)
		}
	}

	s, err = New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(s.Dir(v.ID), "f")); string(b) != "kept" {
		t.Errorf("after reconcile: %q %v, want the volume's file", b, err)
	}
	for _, p := range []string{s.Dir(orphan.ID), s.image(orphan.ID)} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("orphan's %s still there: %v", p, err)
		}
	}

	if err := s.Delete(ctx, "team", v.ID); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(cfg.Dir); len(entries) != 3 {
		t.Errorf("after delete the volumes dir holds %v, want only the 3 entries not Warren's", entries)
	}
	out, _ := exec.Command("losetup", "-j", s.image(v.ID)).Output()
	if strings.TrimSpace(string(out)) != "" {
		t.Errorf("loop device left attached: %s", out)
	}
}

func TestDiskLimitBounds(t *testing.T) {
	st, err := sqlite.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir := t.TempDir()
	for _, mb := range []int{-1, 1, minSizeMB - 1} {
		_, err := New(context.Background(), Config{Store: st, Dir: dir, KeyFile: filepath.Join(dir, "key"), SizeLimitMB: mb})
		if err == nil || !strings.Contains(err.Error(), "--volume-size-mb") {
			t.Errorf("limit %d: %v, want an error naming --volume-size-mb", mb, err)
		}
	}
}
