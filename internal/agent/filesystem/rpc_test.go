package filesystem

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/warrentest"
	pb "github.com/warrenhq/warren/proto/filesystem"
)

func TestStat(t *testing.T) {
	forEachCodec(t, func(t *testing.T, f *fixture) {
		cur, _ := user.Current()
		file := filepath.Join(f.dir, "hello.txt")
		warrentest.WriteFile(t, file, "hello")
		if err := os.Symlink(file, filepath.Join(f.dir, "link")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("sub", filepath.Join(f.dir, "dirlink")); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(f.dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("missing", filepath.Join(f.dir, "dangling")); err != nil {
			t.Fatal(err)
		}
		type view struct {
			Name, Path, Perms, Owner, Target string
			Type                             pb.FileType
			Mode                             uint32
			Size                             int64
		}
		tests := []struct {
			name string
			path string
			want view
		}{
			{"file", file, view{"hello.txt", file, "-rw-r--r--", cur.Username, "", pb.FileType_FILE_TYPE_FILE, 0o644, 5}},
			{"dir", filepath.Join(f.dir, "sub"), view{"sub", filepath.Join(f.dir, "sub"), "drwxr-xr-x", cur.Username, "", pb.FileType_FILE_TYPE_DIRECTORY, 0o755, 0}},
			{"link to file", filepath.Join(f.dir, "link"), view{"link", filepath.Join(f.dir, "link"), "Lrwxrwxrwx", cur.Username, file, pb.FileType_FILE_TYPE_FILE, 0o644, 0}},
			{"relative link to dir", filepath.Join(f.dir, "dirlink"), view{"dirlink", filepath.Join(f.dir, "dirlink"), "Lrwxrwxrwx", cur.Username, filepath.Join(f.dir, "sub"), pb.FileType_FILE_TYPE_DIRECTORY, 0o755, 0}},
			{"dangling link", filepath.Join(f.dir, "dangling"), view{"dangling", filepath.Join(f.dir, "dangling"), "Lrwxrwxrwx", cur.Username, filepath.Join(f.dir, "missing"), pb.FileType_FILE_TYPE_UNSPECIFIED, 0o777, 0}},
			{"dot-dot stays a path", f.dir + "/sub/../hello.txt", view{"hello.txt", file, "-rw-r--r--", cur.Username, "", pb.FileType_FILE_TYPE_FILE, 0o644, 5}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				res, err := f.client.Stat(context.Background(), connect.NewRequest(&pb.StatRequest{Path: tc.path}))
				if err != nil {
					t.Fatal(err)
				}
				e := res.Msg.GetEntry()
				got := view{e.GetName(), e.GetPath(), e.GetPermissions(), e.GetOwner(), e.GetSymlinkTarget(), e.GetType(), e.GetMode(), e.GetSize()}
				if tc.want.Type != pb.FileType_FILE_TYPE_FILE || tc.want.Target != "" {
					got.Size = tc.want.Size // link and dir sizes are the filesystem's business
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("entry (-want +got):\n%s", diff)
				}
				if e.GetGroup() == "" || e.GetModifiedTime() == nil {
					t.Errorf("group %q, modified %v: want both set", e.GetGroup(), e.GetModifiedTime())
				}
			})
		}
	})
}

func TestStatErrors(t *testing.T) {
	forEachCodec(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		missing := filepath.Join(f.dir, "nope")
		_, err := f.client.Stat(ctx, connect.NewRequest(&pb.StatRequest{Path: missing}))
		wantCode(t, err, connect.CodeNotFound, "path '"+missing+"' does not exist")

		_, err = f.client.Stat(ctx, as(&pb.StatRequest{Path: f.dir}, "no-such-user-xyz"))
		wantCode(t, err, connect.CodeUnauthenticated, "invalid username: 'no-such-user-xyz'")

		_, err = f.client.Stat(ctx, connect.NewRequest(&pb.StatRequest{Path: f.dir + "/a\x00b"}))
		wantCode(t, err, connect.CodeInvalidArgument, "")

		_, err = f.client.Stat(ctx, connect.NewRequest(&pb.StatRequest{Path: "/" + strings.Repeat("x", 5000)}))
		wantCode(t, err, connect.CodeInvalidArgument, "")

		odd := filepath.Join(f.dir, "\x01\x7f名前 \t\n")
		warrentest.WriteFile(t, odd, "x")
		res, err := f.client.Stat(ctx, connect.NewRequest(&pb.StatRequest{Path: odd}))
		if err != nil {
			t.Fatal(err)
		}
		if res.Msg.GetEntry().GetPath() != odd {
			t.Errorf("path = %q, want %q", res.Msg.GetEntry().GetPath(), odd)
		}
	})
}

func TestEmptyPathIsDefaultWorkdir(t *testing.T) {
	f := newFixture(t)
	f.st.SetDefaultWorkdir(f.dir)
	res, err := f.client.Stat(context.Background(), connect.NewRequest(&pb.StatRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Msg.GetEntry().GetPath(); got != f.dir {
		t.Errorf("path = %q, want the default workdir %q", got, f.dir)
	}
}

func TestStatMetadata(t *testing.T) {
	f := newFixture(t)
	file := filepath.Join(f.dir, "m.txt")
	warrentest.WriteFile(t, file, "x")
	if err := writeMetadata(file, map[string]string{"a": "1", "b": "two"}); err != nil {
		t.Skipf("filesystem of %s has no user xattrs: %v", f.dir, err)
	}
	if err := writeMetadata(file, map[string]string{"b": "2"}); err != nil {
		t.Fatal(err)
	}
	res, err := f.client.Stat(context.Background(), connect.NewRequest(&pb.StatRequest{Path: file}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"b": "2"}, res.Msg.GetEntry().GetMetadata()); diff != "" {
		t.Errorf("metadata after replacement (-want +got):\n%s", diff)
	}
}

func TestMakeDir(t *testing.T) {
	forEachCodec(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		target := filepath.Join(f.dir, "a", "b", "c")
		res, err := f.client.MakeDir(ctx, connect.NewRequest(&pb.MakeDirRequest{Path: target}))
		if err != nil {
			t.Fatal(err)
		}
		if e := res.Msg.GetEntry(); e.GetPath() != target || e.GetType() != pb.FileType_FILE_TYPE_DIRECTORY || e.GetMode() != 0o755 {
			t.Errorf("entry = %v", e)
		}
		for _, p := range []string{filepath.Join(f.dir, "a"), filepath.Join(f.dir, "a", "b")} {
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("parent %s: %v %v, want a 0755 directory", p, fi, err)
			}
		}
		_, err = f.client.MakeDir(ctx, connect.NewRequest(&pb.MakeDirRequest{Path: target}))
		wantCode(t, err, connect.CodeAlreadyExists, "")

		file := filepath.Join(f.dir, "file")
		warrentest.WriteFile(t, file, "x")
		_, err = f.client.MakeDir(ctx, connect.NewRequest(&pb.MakeDirRequest{Path: file}))
		wantCode(t, err, connect.CodeInvalidArgument, "")
		_, err = f.client.MakeDir(ctx, connect.NewRequest(&pb.MakeDirRequest{Path: filepath.Join(file, "sub")}))
		wantCode(t, err, connect.CodeInvalidArgument, "")
	})
}

func TestMakeDirChownsToUser(t *testing.T) {
	warrentest.RequireRoot(t, "the agent chowns to another user, which only root may do")
	f := newFixture(t)
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user 'nobody' on this system")
	}
	warrentest.GiveDir(t, f.dir, nobody)
	target := filepath.Join(f.dir, "x", "y")
	res, err := f.client.MakeDir(context.Background(), as(&pb.MakeDirRequest{Path: target}, "nobody"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Msg.GetEntry().GetOwner() != "nobody" {
		t.Errorf("owner = %q, want nobody", res.Msg.GetEntry().GetOwner())
	}
	for _, p := range []string{filepath.Join(f.dir, "x"), target} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid == 0 || nobody.Uid != strconvFormat(uid) {
			t.Errorf("%s uid = %d, want nobody (%s)", p, uid, nobody.Uid)
		}
	}
}

func TestMove(t *testing.T) {
	forEachCodec(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		src := filepath.Join(f.dir, "src.txt")
		warrentest.WriteFile(t, src, "data")
		dst := filepath.Join(f.dir, "new", "parent", "dst.txt")
		res, err := f.client.Move(ctx, connect.NewRequest(&pb.MoveRequest{Source: src, Destination: dst}))
		if err != nil {
			t.Fatal(err)
		}
		if e := res.Msg.GetEntry(); e.GetPath() != dst || e.GetName() != "dst.txt" || e.GetSize() != 4 {
			t.Errorf("entry = %v", e)
		}
		if _, err := os.Stat(src); !os.IsNotExist(err) {
			t.Errorf("source still there: %v", err)
		}
		_, err = f.client.Move(ctx, connect.NewRequest(&pb.MoveRequest{Source: src, Destination: dst}))
		wantCode(t, err, connect.CodeNotFound, "path '"+src+"' does not exist")
	})
}

func TestRemove(t *testing.T) {
	forEachCodec(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		tree := filepath.Join(f.dir, "tree")
		warrentest.WriteFile(t, filepath.Join(tree, "a", "b.txt"), "x")
		if _, err := f.client.Remove(ctx, connect.NewRequest(&pb.RemoveRequest{Path: tree})); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(tree); !os.IsNotExist(err) {
			t.Errorf("tree still there: %v", err)
		}
		if _, err := f.client.Remove(ctx, connect.NewRequest(&pb.RemoveRequest{Path: tree})); err != nil {
			t.Errorf("removing a missing path: %v, want success", err)
		}
	})
}
