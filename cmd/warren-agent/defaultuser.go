package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The account E2B templates have and the SDK assumes: tests check that
// files belong to "user" and that `pwd` is /home/user.
const (
	defaultUserName = "user"
	defaultUserHome = "/home/user"
	firstUserID     = 1000
	sudoersLine     = defaultUserName + " ALL=(ALL:ALL) NOPASSWD: ALL\n"
)

// ensureDefaultUser creates the account "user" in the image rooted at root
// unless it exists. It edits /etc/passwd, /etc/group and /etc/shadow itself
// because many images have no useradd. The passwd entry is written last,
// so an interrupted run is completed by the next one, and a complete one
// makes the next one do nothing. It reports whether it created the user.
func ensureDefaultUser(root string) (bool, error) {
	passwdPath := filepath.Join(root, "etc/passwd")
	passwd, err := readDB(passwdPath, "root:x:0:0:root:/root:/bin/sh")
	if err != nil {
		return false, err
	}
	if _, ok := lookupEntry(passwd, defaultUserName); ok {
		return false, nil
	}
	uid := freeID(passwd, 2, firstUserID)

	gid, err := ensureGroup(filepath.Join(root, "etc/group"), uid)
	if err != nil {
		return false, err
	}
	if err := ensureShadow(filepath.Join(root, "etc/shadow")); err != nil {
		return false, err
	}
	if err := makeHome(root, uid, gid); err != nil {
		return false, err
	}
	if err := grantSudo(root); err != nil {
		return false, err
	}
	shell := "/bin/sh"
	if _, err := os.Stat(filepath.Join(root, "bin/bash")); err == nil {
		shell = "/bin/bash"
	}
	entry := fmt.Sprintf("%s:x:%d:%d::%s:%s", defaultUserName, uid, gid, defaultUserHome, shell)
	return true, writeDB(passwdPath, append(passwd, entry))
}

// ensureGroup makes sure group "user" exists, preferring gid == uid as
// useradd does, and adds the user to the admin groups (sudo, wheel) the
// image has. It returns the group's gid.
func ensureGroup(path string, uid int) (int, error) {
	groups, err := readDB(path, "root:x:0:")
	if err != nil {
		return 0, err
	}
	var gid int
	if f, ok := lookupEntry(groups, defaultUserName); ok && len(f) > 2 {
		if gid, err = strconv.Atoi(f[2]); err != nil {
			return 0, fmt.Errorf("%s: group %q has gid %q", path, defaultUserName, f[2])
		}
	} else {
		gid = uid
		if slices.Contains(ids(groups, 2), gid) {
			gid = freeID(groups, 2, firstUserID)
		}
		groups = append(groups, fmt.Sprintf("%s:x:%d:", defaultUserName, gid))
	}
	for i, line := range groups {
		f := strings.Split(line, ":")
		if len(f) != 4 || (f[0] != "sudo" && f[0] != "wheel") {
			continue
		}
		members := strings.Split(f[3], ",")
		if f[3] == "" {
			members = nil
		}
		if !slices.Contains(members, defaultUserName) {
			f[3] = strings.Join(append(members, defaultUserName), ",")
			groups[i] = strings.Join(f, ":")
		}
	}
	return gid, writeDB(path, groups)
}

// ensureShadow gives the user a shadow entry with no usable password (sudo
// needs none) when the image keeps a shadow file at all.
func ensureShadow(path string) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	shadow, err := readDB(path, "")
	if err != nil {
		return err
	}
	if _, ok := lookupEntry(shadow, defaultUserName); ok {
		return nil
	}
	days := time.Now().Unix() / 86400
	return writeDB(path, append(shadow, fmt.Sprintf("%s:*:%d:0:99999:7:::", defaultUserName, days)))
}

// makeHome creates /home/user from /etc/skel, owned by the user. A home
// the image already has is kept, only handed to the user.
func makeHome(root string, uid, gid int) error {
	home := filepath.Join(root, defaultUserHome)
	if err := os.MkdirAll(filepath.Dir(home), 0o755); err != nil {
		return err
	}
	err := os.Mkdir(home, 0o755)
	if errors.Is(err, fs.ErrExist) {
		return os.Lchown(home, uid, gid)
	}
	if err != nil {
		return err
	}
	if err := os.Lchown(home, uid, gid); err != nil {
		return err
	}
	skel := filepath.Join(root, "etc/skel")
	if _, err := os.Stat(skel); err != nil {
		return nil
	}
	return copyTree(skel, home, uid, gid)
}

// copyTree copies regular files, directories and symlinks from src into
// dst, owned by uid:gid.
func copyTree(src, dst string, uid, gid int) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "." {
			return nil
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, info.Mode().Perm()); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(target, data, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return nil
		}
		return os.Lchown(target, uid, gid)
	})
}

// grantSudo gives the user passwordless sudo, as E2B templates do, when
// the image has sudo.
func grantSudo(root string) error {
	found := false
	for _, p := range []string{"usr/bin/sudo", "bin/sudo", "usr/sbin/sudo", "usr/local/bin/sudo"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			found = true
			break
		}
	}
	if !found {
		return nil
	}
	dir := filepath.Join(root, "etc/sudoers.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, "90-warren-user")
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	// sudo ignores files in sudoers.d that others can write.
	return os.WriteFile(path, []byte(sudoersLine), 0o440)
}

// readDB reads a colon-separated account file as lines, without blank
// ones. A missing file reads as the single line seed (if any), so a
// scratch-like image gets a root entry too.
func readDB(path, seed string) ([]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if seed == "" {
			return nil, nil
		}
		return []string{seed}, nil
	}
	if err != nil {
		return nil, err
	}
	var lines []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.TrimSpace(line) != "" {
			lines = append(lines, line)
		}
	}
	return lines, nil
}

// writeDB replaces path with lines through a rename, so readers never see
// a half-written account file; it keeps the file's mode and owner.
func writeDB(path string, lines []string) error {
	mode, uid, gid := fs.FileMode(0o644), 0, 0
	if info, err := os.Stat(path); err == nil {
		mode = info.Mode().Perm()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".warren-tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), mode); err != nil {
		return err
	}
	// WriteFile's mode passes through the umask; the shadow file's 0640
	// must stay exactly that.
	if err := os.Chmod(tmp, mode); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Lchown(tmp, uid, gid); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func lookupEntry(lines []string, name string) ([]string, bool) {
	for _, line := range lines {
		f := strings.Split(line, ":")
		if f[0] == name {
			return f, true
		}
	}
	return nil, false
}

// ids returns the numeric field at index col of every line.
func ids(lines []string, col int) []int {
	var out []int
	for _, line := range lines {
		f := strings.Split(line, ":")
		if len(f) > col {
			if n, err := strconv.Atoi(f[col]); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// freeID returns the smallest id ≥ from that no line uses in column col.
func freeID(lines []string, col, from int) int {
	used := ids(lines, col)
	id := from
	for slices.Contains(used, id) {
		id++
	}
	return id
}
