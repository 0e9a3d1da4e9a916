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
		{"symlink to nothing", []entry{{name: "l", typ: tar.TypeSymlink}}, "empty or invalid target"},
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

// Links to anywhere are the image's (E2B's SDK uploads a folder's
// absolute and dangling links as they are): extracted as links, never
// followed. What the archive puts under a link is skipped, and a later
// entry of the same name replaces the link.
func TestExtractKeepsLinksToAnywhere(t *testing.T) {
	parent := t.TempDir()
	dest := filepath.Join(parent, "ctx")
	os.Mkdir(dest, 0o700)
	outside := filepath.Join(parent, "outside")
	os.Mkdir(outside, 0o700)
	os.WriteFile(filepath.Join(outside, "f"), []byte("host"), 0o600)
	err := template.Extract(bytes.NewReader(archive(t,
		entry{name: "folder/abs", typ: tar.TypeSymlink, link: outside},
		entry{name: "folder/abs/x", body: "written through"},
		entry{name: "folder/up", typ: tar.TypeSymlink, link: "../../outside"},
		entry{name: "folder/up/y", body: "written through"},
		entry{name: "folder/dangling", typ: tar.TypeSymlink, link: "12345test.txt"},
		entry{name: "folder/f", typ: tar.TypeSymlink, link: filepath.Join(outside, "f")},
		entry{name: "folder/f", body: "replaced"},
		entry{name: "folder/d", typ: tar.TypeSymlink, link: outside},
		entry{name: "folder/d", typ: tar.TypeDir, mode: 0o755},
		entry{name: "folder/d/z", body: "z"},
		entry{name: "hard", typ: tar.TypeLink, link: "folder/abs"},
	)), dest)
	if err == nil || !strings.Contains(err.Error(), "hard link to 'folder/abs'") {
		t.Errorf("hard link to a link: %v", err)
	}
	for name, want := range map[string]string{"folder/abs": outside, "folder/up": "../../outside", "folder/dangling": "12345test.txt"} {
		if got, err := os.Readlink(filepath.Join(dest, name)); err != nil || got != want {
			t.Errorf("%s: link to %q (%v), want %q", name, got, err, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dest, "folder", "f")); err != nil || string(b) != "replaced" {
		t.Errorf("folder/f: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "folder", "d", "z")); err != nil || string(b) != "z" {
		t.Errorf("folder/d/z: %q %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "f")); string(b) != "host" {
		t.Errorf("the host file was written through a link: %q", b)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("files written outside: %v", ents)
	}
	if err := template.CheckArchive(bytes.NewReader(archive(t, entry{name: "l", typ: tar.TypeSymlink, link: "/etc"}))); err != nil {
		t.Errorf("CheckArchive refuses an absolute link: %v", err)
	}
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
