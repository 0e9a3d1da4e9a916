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

	files, err := copyFiles(dir, "app")
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
	if glob, err := copyFiles(dir, "*.txt"); err != nil || strings.Join(glob, ",") != "other.txt" {
		t.Errorf("glob = %v %v", glob, err)
	}
	for _, bad := range []string{"missing", "../outside"} {
		if _, err := copyFiles(dir, bad); !errors.As(err, new(*InvalidArgumentError)) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
