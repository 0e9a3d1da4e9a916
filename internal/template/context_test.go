package template

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
	"time"

	"github.com/google/go-cmp/cmp"
)

// makeTree writes a context directory under dir: files, a nested
// directory, an executable, a link, a name past ustar's 100 bytes and,
// with git, repositories at the top and below. Every entry gets mtime.
func makeTree(t *testing.T, dir string, git bool, mtime time.Time) {
	t.Helper()
	long := strings.Repeat("n", 120)
	files := map[string]string{"a.txt": "a", "sub/b.txt": "b", "sub/deep/" + long: "long"}
	if git {
		files[".git/HEAD"] = "ref: refs/heads/main"
		files["sub/.git/config"] = "[core]"
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Type()&os.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(p, mtime, mtime)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func contextTar(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := writeContext(&buf, dir, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func uploadTar(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteUpload(&buf, dir); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tarNames(t *testing.T, b []byte) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// The CLI's upload and the server's build context are one writer's: the
// same tree, written at other times, is the same bytes from both, and the
// upload leaves .git out.
func TestContextTarsIdentical(t *testing.T) {
	plain, older, withGit := t.TempDir(), t.TempDir(), t.TempDir()
	makeTree(t, plain, false, time.Now())
	makeTree(t, older, false, time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC))
	makeTree(t, withGit, true, time.Now().Add(-time.Hour))

	want := contextTar(t, plain)
	if got := contextTar(t, older); !bytes.Equal(got, want) {
		t.Errorf("the same tree with other times gives another context tar")
	}
	if got := uploadTar(t, plain); !bytes.Equal(got, want) {
		t.Errorf("the upload of a tree differs from its build context")
	}
	if got := uploadTar(t, withGit); !bytes.Equal(got, want) {
		t.Errorf("the upload of a tree with .git directories differs from the tree without:\n%v", tarNames(t, got))
	}
	wantNames := []string{"a.txt", "link", "run.sh", "sub/", "sub/b.txt", "sub/deep/", "sub/deep/" + strings.Repeat("n", 120)}
	if diff := cmp.Diff(wantNames, tarNames(t, want)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	// The build context keeps what the upload leaves out: its trees are
	// the uploads as extracted, .git and all.
	if names := tarNames(t, contextTar(t, withGit)); !strings.Contains(strings.Join(names, " "), "sub/.git/config") {
		t.Errorf("the build context dropped a .git directory: %v", names)
	}
}
