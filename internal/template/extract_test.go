package template_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/template"
)

func TestExtractRefusesHostileEntries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []entry
		want    string
	}{
		{"dot-dot", []entry{{name: "../evil", body: "x"}}, "leaves the build context"},
		{"nested dot-dot", []entry{{name: "a/../../evil", body: "x"}}, "leaves the build context"},
		{"absolute", []entry{{name: "/etc/evil", body: "x"}}, "absolute path"},
		{"absolute symlink", []entry{{name: "l", typ: tar.TypeSymlink, link: "/etc"}}, "points outside"},
		{"escaping symlink", []entry{{name: "a/l", typ: tar.TypeSymlink, link: "../../x"}}, "points outside"},
		{"escaping hard link", []entry{{name: "h", typ: tar.TypeLink, link: "../x"}}, "points outside"},
		{"device", []entry{{name: "dev", typ: tar.TypeChar}}, "unsupported type"},
		{"fifo", []entry{{name: "p", typ: tar.TypeFifo}}, "unsupported type"},
		{"hard link to nothing", []entry{{name: "h", typ: tar.TypeLink, link: "missing"}}, "not an earlier file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dest := filepath.Join(parent, "ctx")
			os.Mkdir(dest, 0o700)
			err := template.Extract(bytes.NewReader(archive(t, tc.entries...)), dest)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Extract = %v, want an error with %q", err, tc.want)
			}
			assertOnlyUnder(t, parent, dest)
		})
	}
}

func TestExtractKeepsInsideLinks(t *testing.T) {
	dest := t.TempDir()
	err := template.Extract(bytes.NewReader(archive(t,
		entry{name: "dir", typ: tar.TypeDir, mode: 0o755},
		entry{name: "dir/file.sh", body: "echo", mode: 0o751},
		entry{name: "dir/link", typ: tar.TypeSymlink, link: "file.sh"},
		entry{name: "hard", typ: tar.TypeLink, link: "dir/file.sh"},
		entry{name: "dir/file.sh", body: "echo 2", mode: 0o700}, // a later duplicate wins
	)), dest)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "dir", "link")); string(b) != "echo 2" {
		t.Errorf("through the link: %q", b)
	}
	if fi, _ := os.Stat(filepath.Join(dest, "dir", "file.sh")); fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %v", fi.Mode())
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "hard")); string(b) != "echo" {
		t.Errorf("hard link copy: %q", b)
	}
}

// A symlink inside the archive to a directory, then a file written
// "through" it: it must not land outside, even with a link Extract let in.
func TestExtractNeverWritesThroughLinks(t *testing.T) {
	parent := t.TempDir()
	dest := filepath.Join(parent, "ctx")
	os.Mkdir(dest, 0o700)
	template.Extract(bytes.NewReader(archive(t,
		entry{name: "d", typ: tar.TypeSymlink, link: "."},
		entry{name: "d/d/d/x", body: "x"},
	)), dest)
	assertOnlyUnder(t, parent, dest)
}

// assertOnlyUnder fails if anything but dest exists in parent.
func assertOnlyUnder(t *testing.T, parent, dest string) {
	t.Helper()
	filepath.WalkDir(parent, func(p string, d fs.DirEntry, err error) error {
		if p == parent || p == dest || strings.HasPrefix(p, dest+string(filepath.Separator)) {
			return nil
		}
		t.Errorf("written outside the build context: %s", p)
		return nil
	})
}

func FuzzExtract(f *testing.F) {
	f.Add(archive(f, entry{name: "a/b", body: "x"}, entry{name: "l", typ: tar.TypeSymlink, link: "a"}))
	f.Add(archive(f, entry{name: "../x", body: "x"}))
	f.Add(archive(f, entry{name: "l", typ: tar.TypeSymlink, link: "."}, entry{name: "l/y", body: "y"}))
	f.Add(archive(f, entry{name: "h", typ: tar.TypeLink, link: "a"}))
	// Plain tar too, so that mutations reach the tar reader rather than
	// the gzip checksum.
	zr, _ := gzip.NewReader(bytes.NewReader(archive(f, entry{name: "d", typ: tar.TypeDir}, entry{name: "d/l", typ: tar.TypeSymlink, link: ".."}, entry{name: "d/f", body: "f"})))
	plain, _ := io.ReadAll(zr)
	f.Add(plain)
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dest := filepath.Join(parent, "ctx")
		os.Mkdir(dest, 0o700)
		err := template.Extract(bytes.NewReader(data), dest)
		assertOnlyUnder(t, parent, dest)
		// Whatever Extract accepted, CheckArchive accepts, and the other
		// way round.
		if cerr := template.CheckArchive(bytes.NewReader(data)); (cerr == nil) != (err == nil) && cerr != nil {
			t.Errorf("CheckArchive = %v but Extract = %v", cerr, err)
		}
	})
}
