package filesystem

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	pb "github.com/warrenhq/warren/proto/filesystem"
)

// newTmpfs mounts a fresh tmpfs for the test: a second filesystem to move
// across, with options such as "size=1m".
func newTmpfs(t *testing.T, opts string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fs")
	mountTmpfs(t, dir, opts)
	return dir
}

// mountTmpfs mounts a tmpfs on dir, creating dir, until the test ends. It
// is mounted noatime, so reading a tree to compare it leaves its access
// times as they were.
func mountTmpfs(t *testing.T, dir, opts string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: moving across filesystems is tested on tmpfs mounts, which only root may make")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOATIME, opts)
	if errors.Is(err, unix.EPERM) {
		t.Skipf("cannot mount a tmpfs here (%v): moving across filesystems needs two", err)
	}
	if err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// spec is one entry of a test tree; "." is the root, parents come first.
type spec struct {
	path string
	kind string // file, dir, symlink, hardlink, fifo, chardev or socket
	mode uint32 // permission bits with setuid, setgid and sticky
	data string // a file's contents; a symlink's target; a hardlink's first name
	meta string // the SDK metadata "note", stored as a user.e2b.note xattr
}

// build creates specs under root, then gives each entry owner 1000:1000,
// its mode and times of its own, so a copy that drops any of them shows.
func build(t *testing.T, root string, specs []spec) {
	t.Helper()
	for _, s := range specs {
		p := filepath.Join(root, s.path)
		var err error
		switch s.kind {
		case "file":
			err = os.WriteFile(p, []byte(s.data), 0o600)
		case "dir":
			err = os.Mkdir(p, 0o700)
		case "symlink":
			err = os.Symlink(s.data, p)
		case "hardlink":
			err = os.Link(filepath.Join(root, s.data), p)
		case "fifo":
			err = unix.Mkfifo(p, 0o600)
		case "chardev":
			err = unix.Mknod(p, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3)))
			if errors.Is(err, unix.EPERM) {
				t.Skipf("cannot make a device node here: %v", err)
			}
		case "socket":
			err = unix.Mknod(p, unix.S_IFSOCK|0o600, 0)
		default:
			t.Fatalf("unknown kind %q", s.kind)
		}
		if err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
		if s.meta == "" {
			continue
		}
		if err := writeMetadata(p, map[string]string{"note": s.meta}); errors.Is(err, ErrMetadataUnsupported) {
			t.Skipf("tmpfs has no user xattrs on this kernel: %v", err)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range specs {
		if s.kind == "hardlink" {
			continue // the inode is set up through its first name
		}
		p := filepath.Join(root, s.path)
		if err := os.Lchown(p, 1000, 1000); err != nil {
			t.Fatal(err)
		}
		if s.kind != "symlink" {
			if err := unix.Chmod(p, s.mode); err != nil { // after chown, which clears setuid
				t.Fatal(err)
			}
		}
		mtime := time.Date(2021, 1, 1+i, 12, 0, 0, 123456789, time.UTC)
		times := []unix.Timespec{
			unix.NsecToTimespec(mtime.Add(time.Hour).UnixNano()),
			unix.NsecToTimespec(mtime.UnixNano()),
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, times, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
	}
}

// node is what a user can observe of one entry.
type node struct {
	Mode         uint32 // type and permission bits
	Nlink        uint64
	UID, GID     uint32
	Atime, Mtime int64
	Data         string // a file's contents, a symlink's target
	Meta         map[string]string
}

// snapshot describes every entry under root, by path relative to it.
func snapshot(t *testing.T, root string) map[string]node {
	t.Helper()
	nodes := map[string]node{}
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		n := node{
			Mode: st.Mode, Nlink: uint64(st.Nlink), UID: st.Uid, GID: st.Gid,
			Atime: st.Atim.Nano(), Mtime: st.Mtim.Nano(),
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			var b []byte
			if b, err = os.ReadFile(p); err == nil {
				n.Data = string(b)
				n.Meta, err = ReadMetadata(p)
			}
		case unix.S_IFDIR:
			n.Meta, err = ReadMetadata(p)
		case unix.S_IFLNK:
			n.Data, err = os.Readlink(p)
		}
		rel, _ := filepath.Rel(root, p)
		nodes[rel] = n
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// entryNames lists dir.
func entryNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func errnoIn(err error) syscall.Errno {
	var errno syscall.Errno
	errors.As(err, &errno)
	return errno
}

func TestMoveAcrossFilesystems(t *testing.T) {
	tests := []struct {
		name  string
		specs []spec
	}{
		{"file", []spec{{".", "file", 0o644, "hello", "kept"}}},
		{"setuid file", []spec{{".", "file", 0o4755, "#!/bin/sh\n", ""}}},
		{"relative symlink", []spec{{".", "symlink", 0, "../elsewhere/target", ""}}},
		{"fifo", []spec{{".", "fifo", 0o640, "", ""}}},
		{"tree", []spec{
			{".", "dir", 0o755, "", "root"},
			{"run", "file", 0o4755, "#!/bin/sh\n", "suid"},
			{"private", "dir", 0o700, "", "private"},
			{"private/nested", "dir", 0o2750, "", ""},
			{"private/nested/deep", "dir", 0o500, "", ""},
			{"private/nested/deep/leaf.txt", "file", 0o400, "leaf", ""},
			{"shared", "dir", 0o1777, "", ""},
			{"link", "symlink", 0, "private/nested/deep/leaf.txt", ""},
			{"dangling", "symlink", 0, "../nowhere", ""},
			{"pipe", "fifo", 0o620, "", ""},
			{"empty", "file", 0o640, "", ""},
			{"linked", "file", 0o644, "one inode", ""},
			{"private/linked-too", "hardlink", 0, "linked", ""},
		}},
	}
	srcFS, dstFS := newTmpfs(t, ""), newTmpfs(t, "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := filepath.Join(srcFS, tc.name)
			dstParent := filepath.Join(dstFS, tc.name)
			dst := filepath.Join(dstParent, "moved")
			if err := os.Mkdir(dstParent, 0o755); err != nil {
				t.Fatal(err)
			}
			build(t, src, tc.specs)
			want := snapshot(t, src)
			if err := move(t.Context(), src, dst); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, snapshot(t, dst)); diff != "" {
				t.Errorf("moved tree (-source before +destination):\n%s", diff)
			}
			if _, err := os.Lstat(src); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("source still there: %v", err)
			}
			if diff := cmp.Diff([]string{"moved"}, entryNames(t, dstParent)); diff != "" {
				t.Errorf("destination directory (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMoveAcrossReplacesLikeRename(t *testing.T) {
	file := func(data string) []spec { return []spec{{".", "file", 0o644, data, ""}} }
	emptyDir := []spec{{".", "dir", 0o755, "", ""}}
	fullDir := func(data string) []spec {
		return []spec{{".", "dir", 0o755, "", ""}, {"f", "file", 0o644, data, ""}}
	}
	tests := []struct {
		name     string
		src, dst []spec
	}{
		{"file over file", file("new"), file("old")},
		{"file over symlink", file("new"), []spec{{".", "symlink", 0, "somewhere", ""}}},
		{"file over dir", file("new"), emptyDir},
		{"dir over file", fullDir("new"), file("old")},
		{"dir over empty dir", fullDir("new"), emptyDir},
		{"dir over non-empty dir", fullDir("new"), fullDir("old")},
	}
	oneFS, srcFS, dstFS := newTmpfs(t, ""), newTmpfs(t, ""), newTmpfs(t, "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			same := filepath.Join(oneFS, tc.name)
			if err := os.Mkdir(same, 0o755); err != nil {
				t.Fatal(err)
			}
			build(t, filepath.Join(same, "src"), tc.src)
			build(t, filepath.Join(same, "dst"), tc.dst)
			wantErr := errnoIn(os.Rename(filepath.Join(same, "src"), filepath.Join(same, "dst")))

			src := filepath.Join(srcFS, tc.name)
			dstParent := filepath.Join(dstFS, tc.name)
			dst := filepath.Join(dstParent, "dst")
			if err := os.Mkdir(dstParent, 0o755); err != nil {
				t.Fatal(err)
			}
			build(t, src, tc.src)
			build(t, dst, tc.dst)
			srcBefore, dstBefore := snapshot(t, src), snapshot(t, dst)

			err := move(t.Context(), src, dst)
			if got := errnoIn(err); got != wantErr || (err == nil) != (wantErr == 0) {
				t.Fatalf("move across filesystems: %v; want errno %d (%v) as on one filesystem", err, wantErr, wantErr)
			}
			if wantErr == 0 {
				if diff := cmp.Diff(srcBefore, snapshot(t, dst)); diff != "" {
					t.Errorf("destination (-source before +after):\n%s", diff)
				}
			} else {
				if diff := cmp.Diff(srcBefore, snapshot(t, src)); diff != "" {
					t.Errorf("source (-before +after):\n%s", diff)
				}
				if diff := cmp.Diff(dstBefore, snapshot(t, dst)); diff != "" {
					t.Errorf("destination (-before +after):\n%s", diff)
				}
			}
			if diff := cmp.Diff([]string{"dst"}, entryNames(t, dstParent)); diff != "" {
				t.Errorf("destination directory (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMoveAcrossLeavesNothingOnFailure(t *testing.T) {
	// Each tree fails at "z", after "a" was copied (entries are copied in
	// lexical order) with a read-only directory the cleanup must delete.
	prefix := []spec{
		{".", "dir", 0o755, "", ""},
		{"a", "dir", 0o755, "", ""},
		{"a/locked", "dir", 0o500, "", ""},
		{"a/locked/f", "file", 0o400, "x", ""},
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		opts  string // of the destination tmpfs
		last  spec
		check func(t *testing.T, err error)
	}{
		{"no space", t.Context(), "size=1m", spec{"z", "file", 0o644, strings.Repeat("x", 2<<20), ""},
			func(t *testing.T, err error) {
				if !errors.Is(err, unix.ENOSPC) {
					t.Errorf("error = %v, want ENOSPC", err)
				}
			}},
		{"char device", t.Context(), "", spec{"z", "chardev", 0o600, "", ""}, wantUnmovable("z", "character device")},
		{"socket", t.Context(), "", spec{"z", "socket", 0o600, "", ""}, wantUnmovable("z", "socket")},
		{"cancelled", cancelled, "", spec{"z", "file", 0o644, "x", ""},
			func(t *testing.T, err error) {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("error = %v, want context.Canceled", err)
				}
			}},
	}
	srcFS := newTmpfs(t, "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := filepath.Join(srcFS, tc.name)
			build(t, src, append(append([]spec(nil), prefix...), tc.last))
			before := snapshot(t, src)
			dstFS := newTmpfs(t, tc.opts)
			err := move(tc.ctx, src, filepath.Join(dstFS, "moved"))
			if err == nil {
				t.Fatal("move succeeded, want an error")
			}
			tc.check(t, err)
			if diff := cmp.Diff(before, snapshot(t, src)); diff != "" {
				t.Errorf("source (-before +after):\n%s", diff)
			}
			if left := entryNames(t, dstFS); len(left) > 0 {
				t.Errorf("destination filesystem holds %q, want nothing", left)
			}
		})
	}
}

// wantUnmovable checks that the move refused the entry rel of the source
// tree, naming it and its kind.
func wantUnmovable(rel, kind string) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var ue *unmovableError
		if !errors.As(err, &ue) {
			t.Fatalf("error = %v, want an unmovableError", err)
		}
		if !strings.HasSuffix(ue.path, "/"+rel) || !strings.Contains(ue.Error(), "is a "+kind+",") {
			t.Errorf("error = %q, want it to name %s as a %s", ue, rel, kind)
		}
	}
}

func TestMoveAcrossRefusesBeforeCopying(t *testing.T) {
	srcFS, dstFS := newTmpfs(t, ""), newTmpfs(t, "")
	src, dst := filepath.Join(srcFS, "tree"), filepath.Join(dstFS, "file")
	// The socket would fail the copy; the refusal must come first.
	build(t, src, []spec{{".", "dir", 0o755, "", ""}, {"sock", "socket", 0o600, "", ""}})
	build(t, dst, []spec{{".", "file", 0o644, "old", ""}})
	if err := move(t.Context(), src, dst); errnoIn(err) != unix.ENOTDIR {
		t.Fatalf("moving a directory over a file: %v, want ENOTDIR before anything is copied", err)
	}
}

func TestMoveAcrossIntoItself(t *testing.T) {
	srcFS := newTmpfs(t, "")
	src := filepath.Join(srcFS, "tree")
	build(t, src, []spec{{".", "dir", 0o755, "", ""}, {"mnt", "dir", 0o755, "", ""}})
	mountTmpfs(t, filepath.Join(src, "mnt", "inner"), "")
	err := move(t.Context(), src, filepath.Join(src, "mnt", "inner", "tree"))
	if errnoIn(err) != unix.EINVAL {
		t.Fatalf("error = %v, want EINVAL as rename gives on one filesystem", err)
	}
	if left := entryNames(t, filepath.Join(src, "mnt", "inner")); len(left) > 0 {
		t.Errorf("inner filesystem holds %q, want nothing", left)
	}
}

func TestMoveAcrossFromReadOnly(t *testing.T) {
	srcFS, dstFS := newTmpfs(t, ""), newTmpfs(t, "")
	src := filepath.Join(srcFS, "f")
	build(t, src, []spec{{".", "file", 0o644, "x", ""}})
	if err := unix.Mount("", srcFS, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOATIME, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", srcFS, err)
	}
	err := move(t.Context(), src, filepath.Join(dstFS, "f"))
	if errnoIn(err) != unix.EROFS {
		t.Fatalf("error = %v, want EROFS: the source could not be removed after the copy", err)
	}
	if left := entryNames(t, dstFS); len(left) > 0 {
		t.Errorf("destination filesystem holds %q, want nothing", left)
	}
}

func TestMoveRPCAcrossFilesystems(t *testing.T) {
	forEachCodec(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		srcFS, dstFS, fullFS := newTmpfs(t, ""), newTmpfs(t, ""), newTmpfs(t, "size=64k")
		src := filepath.Join(srcFS, "report.txt")
		build(t, src, []spec{{".", "file", 0o640, "data", "kept"}})
		dst := filepath.Join(dstFS, "new", "parent", "report.txt")
		res, err := f.client.Move(ctx, connect.NewRequest(&pb.MoveRequest{Source: src, Destination: dst}))
		if err != nil {
			t.Fatal(err)
		}
		e := res.Msg.GetEntry()
		type view struct {
			Path, Permissions string
			Size              int64
			Metadata          map[string]string
		}
		want := view{dst, "-rw-r-----", 4, map[string]string{"note": "kept"}}
		if diff := cmp.Diff(want, view{e.GetPath(), e.GetPermissions(), e.GetSize(), e.GetMetadata()}); diff != "" {
			t.Errorf("entry (-want +got):\n%s", diff)
		}
		if _, err := os.Lstat(src); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("source still there: %v", err)
		}

		sock := filepath.Join(srcFS, "dir", "sock")
		build(t, filepath.Dir(sock), []spec{{".", "dir", 0o755, "", ""}, {"sock", "socket", 0o600, "", ""}})
		_, err = f.client.Move(ctx, connect.NewRequest(&pb.MoveRequest{Source: filepath.Dir(sock), Destination: filepath.Join(dstFS, "dir")}))
		wantCode(t, err, connect.CodeInvalidArgument, "'"+sock+"' is a socket, which cannot be moved to another filesystem")

		big := filepath.Join(srcFS, "big")
		build(t, big, []spec{{".", "file", 0o644, strings.Repeat("x", 1<<20), ""}})
		_, err = f.client.Move(ctx, connect.NewRequest(&pb.MoveRequest{Source: big, Destination: filepath.Join(fullFS, "big")}))
		wantCode(t, err, connect.CodeResourceExhausted, "move '"+big+"': no space left on device")
		if left := entryNames(t, fullFS); len(left) > 0 {
			t.Errorf("full filesystem holds %q, want nothing", left)
		}
	})
}
