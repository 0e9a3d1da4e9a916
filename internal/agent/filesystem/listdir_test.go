package filesystem

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/warrentest"
	pb "github.com/warrenhq/warren/proto/filesystem"
)

func TestListDir(t *testing.T) {
	forEachCodec(t, func(t *testing.T, f *fixture) {
		root := filepath.Join(f.dir, "root")
		for _, p := range []string{"b.txt", "a/x.txt", "a/deep/y.txt", "c/z.txt"} {
			warrentest.WriteFile(t, filepath.Join(root, p), "x")
		}
		link := filepath.Join(f.dir, "link")
		if err := os.Symlink(root, link); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name  string
			path  string
			depth uint32
			want  []string
		}{
			{"depth 0 means 1", root, 0, []string{"a", "b.txt", "c"}},
			{"depth 1", root, 1, []string{"a", "b.txt", "c"}},
			{"depth 2", root, 2, []string{"a", "a/deep", "a/x.txt", "b.txt", "c", "c/z.txt"}},
			{"depth 3", root, 3, []string{"a", "a/deep", "a/deep/y.txt", "a/x.txt", "b.txt", "c", "c/z.txt"}},
			{"through a symlink", link, 2, []string{"a", "a/deep", "a/x.txt", "b.txt", "c", "c/z.txt"}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				res, err := f.client.ListDir(context.Background(), connect.NewRequest(&pb.ListDirRequest{Path: tc.path, Depth: tc.depth}))
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range res.Msg.GetEntries() {
					if filepath.Base(e.GetPath()) != e.GetName() {
						t.Errorf("entry %q has name %q", e.GetPath(), e.GetName())
					}
					rel, err := filepath.Rel(tc.path, e.GetPath())
					if err != nil || filepath.Join(tc.path, rel) != e.GetPath() {
						t.Errorf("entry path %q is not under %q", e.GetPath(), tc.path)
					}
					got = append(got, rel)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("entries (-want +got):\n%s", diff)
				}
			})
		}
		missing := filepath.Join(f.dir, "missing")
		_, err := f.client.ListDir(context.Background(), connect.NewRequest(&pb.ListDirRequest{Path: missing}))
		wantCode(t, err, connect.CodeNotFound, "path '"+missing+"' does not exist")
		_, err = f.client.ListDir(context.Background(), connect.NewRequest(&pb.ListDirRequest{Path: filepath.Join(root, "b.txt")}))
		wantCode(t, err, connect.CodeInvalidArgument, "")
	})
}

func TestListDirTypes(t *testing.T) {
	f := newFixture(t)
	warrentest.WriteFile(t, filepath.Join(f.dir, "file"), "x")
	if err := os.Mkdir(filepath.Join(f.dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("file", filepath.Join(f.dir, "link")); err != nil {
		t.Fatal(err)
	}
	res, err := f.client.ListDir(context.Background(), connect.NewRequest(&pb.ListDirRequest{Path: f.dir, Depth: 1}))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]pb.FileType{}
	for _, e := range res.Msg.GetEntries() {
		got[e.GetName()] = e.GetType()
	}
	want := map[string]pb.FileType{
		"dir":  pb.FileType_FILE_TYPE_DIRECTORY,
		"file": pb.FileType_FILE_TYPE_FILE,
		"link": pb.FileType_FILE_TYPE_FILE, // a link reports its target's type
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("types (-want +got):\n%s", diff)
	}
}
