// Package users resolves the sandbox's users and the paths they name. The
// agent runs as root and acts on behalf of a user: this package says who
// that user is (uid, gid, groups, home) and where "~/x" or "x" lands for
// them, and runs the agent's file operations with that user's filesystem
// identity (User.Do). It does not start processes as a user; the process
// package does.
package users

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// User is a resolved account of the sandbox.
type User struct {
	Name   string
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary group IDs, including GID
	Home   string
}

// accountFiles are the files Lookup reads; a change to either (a new user,
// a new group membership) invalidates what it remembers.
var accountFiles = [2]string{"/etc/passwd", "/etc/group"}

// fileID tells one version of a file from another.
type fileID struct {
	ino, size uint64
	mtime     int64
}

// cache remembers resolved users while the account files stay the same:
// every command and file request resolves its user, and reading both
// files each time cost a tenth of a millisecond.
var cache struct {
	sync.Mutex
	ids   [2]fileID
	users map[string]User
}

// Lookup resolves a user by name from the sandbox's account database.
func Lookup(name string) (*User, error) {
	if name == "" {
		return nil, errors.New("empty username")
	}
	ids, stable := currentIDs()
	cache.Lock()
	defer cache.Unlock()
	if !stable || ids != cache.ids {
		cache.ids, cache.users = ids, map[string]User{}
	}
	if u, ok := cache.users[name]; ok {
		u.Groups = slices.Clone(u.Groups)
		return &u, nil
	}
	u, err := lookup(name)
	if err != nil {
		return nil, err
	}
	if stable {
		kept := *u
		kept.Groups = slices.Clone(u.Groups)
		cache.users[name] = kept
	}
	return u, nil
}

// currentIDs identifies the account files as they are now; stable is false
// when one cannot be read (nothing is then remembered).
func currentIDs() (ids [2]fileID, stable bool) {
	for i, f := range accountFiles {
		var st syscall.Stat_t
		if err := syscall.Stat(f, &st); err != nil {
			return ids, false
		}
		ids[i] = fileID{ino: st.Ino, size: uint64(st.Size), mtime: st.Mtim.Nano()}
	}
	return ids, true
}

// lookup reads a user from the account files.
func lookup(name string) (*User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q has a non-numeric uid %q", name, u.Uid)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q has a non-numeric gid %q", name, u.Gid)
	}
	res := &User{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}
	if res.Home == "" {
		res.Home = "/"
	}
	res.Groups = []uint32{res.GID}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			g, err := strconv.ParseUint(id, 10, 32)
			if err == nil && uint32(g) != res.GID {
				res.Groups = append(res.Groups, uint32(g))
			}
		}
	}
	return res, nil
}

// BasicAuthName returns the username of an `Authorization: Basic` header,
// which is how the SDK names the user of an RPC, or "" when there is none.
func BasicAuthName(h http.Header) (string, error) {
	auth := h.Get("Authorization")
	if auth == "" {
		return "", nil
	}
	scheme, payload, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(payload))
	if err != nil {
		return "", fmt.Errorf("invalid basic auth header: %w", err)
	}
	name, _, _ := strings.Cut(string(raw), ":")
	return name, nil
}

// ForRequest resolves the account a request acts for: the Basic auth
// username of h, or defaultUser when h names none. Its errors are fit for
// the client.
func ForRequest(h http.Header, defaultUser string) (*User, error) {
	name, err := BasicAuthName(h)
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = defaultUser
	}
	u, err := Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("invalid username: '%s'", name)
	}
	return u, nil
}

// ResolvePath turns a path as the SDK sends it into an absolute, clean path:
// "~" and "~/x" expand to the user's home, a relative path is taken from the
// home, and an empty path means workdir (or the home when workdir is "").
func (u *User) ResolvePath(p, workdir string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", errors.New("path contains a NUL byte")
	}
	switch {
	case p == "":
		if workdir != "" {
			return u.ResolvePath(workdir, "")
		}
		return filepath.Clean(u.Home), nil
	case p == "~":
		return filepath.Clean(u.Home), nil
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(u.Home, p[2:]), nil
	case filepath.IsAbs(p):
		return filepath.Clean(p), nil
	default:
		return filepath.Join(u.Home, p), nil
	}
}
