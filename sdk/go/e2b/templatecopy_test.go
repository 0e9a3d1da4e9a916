package e2b

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCopyArchiveAndItsHash(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "app", "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "app", "a.txt"), []byte("a"), 0o644)
	os.WriteFile(filepath.Join(dir, "app", "sub", "b.txt"), []byte("b"), 0o600)
	os.Symlink("a.txt", filepath.Join(dir, "app", "link"))
	os.WriteFile(filepath.Join(dir, "other.txt"), []byte("x"), 0o644)
	step := templateStep{Type: "COPY", Args: []string{"app", "/opt/app", "", ""}}

	files, err := copyFiles(dir, "app", false)
	if err != nil || strings.Join(files, ",") != "app,app/a.txt,app/link,app/sub,app/sub/b.txt" {
		t.Fatalf("files %v %v", files, err)
	}
	archive, hash, err := copyArchive(dir, step, files)
	if err != nil {
		t.Fatal(err)
	}
	zr, _ := gzip.NewReader(bytes.NewReader(archive))
	tr := tar.NewReader(zr)
	var names []string
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		names = append(names, h.Name)
		if h.Name == "app/sub/b.txt" {
			if b, _ := io.ReadAll(tr); string(b) != "b" || h.Mode&0o777 != 0o600 {
				t.Errorf("b.txt: %q mode %o", b, h.Mode)
			}
		}
		if h.Name == "app/link" && (h.Typeflag != tar.TypeSymlink || h.Linkname != "a.txt") {
			t.Errorf("link: %+v", h)
		}
	}
	if strings.Join(names, ",") != "app/,app/a.txt,app/link,app/sub/,app/sub/b.txt" {
		t.Errorf("archive entries %v", names)
	}
	if _, again, _ := copyArchive(dir, step, files); again != hash {
		t.Error("the hash of unchanged files changed")
	}
	os.WriteFile(filepath.Join(dir, "app", "a.txt"), []byte("A"), 0o644)
	if _, changed, _ := copyArchive(dir, step, files); changed == hash {
		t.Error("the hash did not change with a file's content")
	}
	if glob, err := copyFiles(dir, "*.txt", false); err != nil || strings.Join(glob, ",") != "other.txt" {
		t.Errorf("glob = %v %v", glob, err)
	}
	for _, bad := range []string{"missing", "../outside"} {
		if _, err := copyFiles(dir, bad, false); !errors.As(err, new(*InvalidArgumentError)) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestCopyResolveSymlinks(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	os.WriteFile(filepath.Join(dir, "data", "d.txt"), []byte("d"), 0o644)
	os.MkdirAll(filepath.Join(dir, "app"), 0o755)
	os.Symlink("../data", filepath.Join(dir, "app", "data"))
	os.Symlink("../data/d.txt", filepath.Join(dir, "app", "file"))
	step := templateStep{Type: "COPY", Args: []string{"app", "/opt/app", "", ""}, ResolveSymlinks: true}

	files, err := copyFiles(dir, "app", true)
	if err != nil || strings.Join(files, ",") != "app,app/data,app/data/d.txt,app/file" {
		t.Fatalf("files %v %v", files, err)
	}
	archive, _, err := copyArchive(dir, step, files)
	if err != nil {
		t.Fatal(err)
	}
	zr, _ := gzip.NewReader(bytes.NewReader(archive))
	tr := tar.NewReader(zr)
	got := map[string]string{}
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(rune(h.Typeflag)) + string(b)
	}
	want := map[string]string{"app/": "5", "app/data/": "5", "app/data/d.txt": "0d", "app/file": "0d"}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %q, want %q (all %q)", name, got[name], w, got)
		}
	}

	os.Symlink("..", filepath.Join(dir, "data", "up"))
	if _, err := copyFiles(dir, "app", true); !errors.As(err, new(*InvalidArgumentError)) || !strings.Contains(err.Error(), "leads back") {
		t.Errorf("a link loop: %v", err)
	}
}
