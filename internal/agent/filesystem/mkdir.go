package filesystem

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// MkdirAllAs creates dir and its missing parents with mode 0755 and hands
// every directory it creates to uid:gid, so a user can write where the
// root-run agent made room for them. Existing directories are left as they
// are. An ancestor that exists but is not a directory yields an error
// matching syscall.ENOTDIR.
func MkdirAllAs(dir string, uid, gid uint32) error {
	dir = filepath.Clean(dir)
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return &fs.PathError{Op: "mkdir", Path: p, Err: syscall.ENOTDIR}
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		p := missing[i]
		if err := os.Mkdir(p, 0o755); err != nil {
			if fi, serr := os.Stat(p); errors.Is(err, fs.ErrExist) && serr == nil && fi.IsDir() {
				continue // created concurrently; that is fine
			}
			return err
		}
		if err := os.Lchown(p, int(uid), int(gid)); err != nil {
			return fmt.Errorf("chown %s: %w", p, err)
		}
	}
	return nil
}
