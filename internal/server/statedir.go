package server

import (
	"log/slog"
	"os"
)

// warnOpenStateDir warns when others than the state dir's owner may
// enter or read it. What Warren keeps there is its own (the store and
// keys 0600, volumes behind a 0700 directory), but a dir an operator made
// 0755 shows others which files, sandboxes' logs and templates there are,
// and lets them into whatever a future file forgets to close.
func warnOpenStateDir(dir string, log *slog.Logger) {
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm()&0o077 == 0 {
		return
	}
	log.Warn("the state dir is open to other users: make it the owner's only (chmod 700)", "dir", dir, "mode", fi.Mode().Perm().String())
}
