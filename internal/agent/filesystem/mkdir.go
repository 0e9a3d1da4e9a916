package filesystem

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// mkdirMu makes each MkdirAllAs whole to the others: a directory is made
// by root and then handed to its user, and a concurrent request that found
// it between the two (as several files written at once into one new
// directory do) would take it as made and be refused writing in it.
var mkdirMu sync.Mutex

// MkdirAllAs creates dir and its missing parents with mode 0755 and hands
// every directory it creates to uid:gid, so a user can write where the
// root-run agent made room for them. Existing directories are left as they
// are. An ancestor that exists but is not a directory yields an error
// matching syscall.ENOTDIR. It returns the directories it created, parents
// first, also when it fails part way.
func MkdirAllAs(dir string, uid, gid uint32) (created []string, err error) {
	mkdirMu.Lock()
	defer mkdirMu.Unlock()
	missing, _, err := missingDirs(dir)
	if err != nil {
		return nil, err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		p := missing[i]
		if err := os.Mkdir(p, 0o755); err != nil {
			if fi, serr := os.Stat(p); errors.Is(err, fs.ErrExist) && serr == nil && fi.IsDir() {
				continue // created meanwhile by a process of the sandbox
			}
			return created, err
		}
		created = append(created, p)
		if err := os.Lchown(p, int(uid), int(gid)); err != nil {
			return created, fmt.Errorf("chown %s: %w", p, err)
		}
	}
	return created, nil
}

// ExistingAncestor is dir's nearest ancestor that exists (dir itself when it
// does), as named, symlinks not resolved.
func ExistingAncestor(dir string) (string, error) {
	_, existing, err := missingDirs(dir)
	return existing, err
}

// missingDirs walks up from dir: the directories that do not exist yet,
// deepest first, and the one that does.
func missingDirs(dir string) (missing []string, existing string, err error) {
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return nil, "", &fs.PathError{Op: "mkdir", Path: p, Err: syscall.ENOTDIR}
			}
			return missing, p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, "", err
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			return missing, "", nil
		}
	}
}
