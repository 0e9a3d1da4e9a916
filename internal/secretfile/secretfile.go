// Package secretfile writes the server's secret files (keys, CAs' keys)
// whole and readable by their owner alone. It does not read them, nor
// decide where they live: the state dir's layout is its callers'.
package secretfile

import (
	"os"
	"path/filepath"
)

// Write writes b to path through a new file in the same directory,
// synced and renamed over the old one, so that a crash leaves the old
// file or the new, never a part. The file is 0600, and a directory made
// for it 0700.
func Write(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// CreateTemp makes the file 0600.
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
