package secretfile

import (
	"os"
	"path/filepath"
	"testing"
)

// Write makes the file and its directory for the owner alone, replaces
// an older file whole, and leaves no temporary file beside it.
func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	path := filepath.Join(dir, "ca-key.pem")
	for _, want := range []string{"first key", "second"} {
		if err := Write(path, []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Fatalf("read back %q, %v; want %q", got, err, want)
		}
	}
	for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700 | os.ModeDir} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want the file alone", len(entries))
	}
}
