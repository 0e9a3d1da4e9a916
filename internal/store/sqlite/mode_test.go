package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

// The store holds secrets in the clear: its database, WAL and shared
// memory files are the owner's only, whatever the umask, and a database
// made 0644 by an older Warren is made 0600 at open.
func TestStoreFilesOwnerOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "warren.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutTeam(ctx, sandbox.Team{ID: "t1", Name: "t1"}); err != nil { // a write: the WAL has content
		t.Fatal(err)
	}
	assertModes(t, path)
	db.Close()

	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		os.Chmod(p, 0o644)
	}
	if db, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	assertModes(t, path)
}

func assertModes(t *testing.T, path string) {
	t.Helper()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			if os.IsNotExist(err) && p != path {
				continue
			}
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want -rw-------", filepath.Base(p), fi.Mode().Perm())
		}
	}
}
