package filesystem

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// move renames src to dst the way mv(1) does. On one filesystem that is
// os.Rename. Across filesystems, where rename fails with EXDEV, it copies
// src to a hidden name beside dst, renames the copy into place and only
// then removes src: dst appears whole or not at all, and src is untouched
// until it does. Cancelling ctx stops the copy and deletes it; once dst is
// in place, src is removed regardless.
func move(ctx context.Context, src, dst string) error {
	err := os.Rename(src, dst)
	if !errors.Is(err, unix.EXDEV) {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(src, &st); err != nil {
		return &fs.PathError{Op: "lstat", Path: src, Err: err}
	}
	if err := checkMove(src, dst, st.Mode&unix.S_IFMT == unix.S_IFDIR); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(dst), ".warren-move-"+rand.Text())
	c := &copier{ctx: ctx, links: map[fileID]string{}}
	err = c.copy(src, tmp, &st)
	if err == nil {
		// os.Rename, not rename(2): a directory at dst is refused with
		// EEXIST, as the first os.Rename refuses it on one filesystem.
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		return errors.Join(err, os.RemoveAll(tmp))
	}
	if err := os.RemoveAll(src); err != nil {
		return fmt.Errorf("remove %s after copying it to %s: %w", src, dst, err)
	}
	return nil
}

// checkMove refuses, before anything is copied, a move that could only
// fail later: with the error rename(2) gives on one filesystem, or because
// src could not be removed once copied (a read-only source filesystem).
func checkMove(src, dst string, dir bool) error {
	refuse := func(errno error) error { return &os.LinkError{Op: "rename", Old: src, New: dst, Err: errno} }
	// AT_EACCESS: judged with the filesystem identity the move runs with
	// (users.User.Do), not the agent's real one.
	if err := unix.Faccessat(unix.AT_FDCWD, filepath.Dir(src), unix.W_OK, unix.AT_EACCESS); err != nil {
		return refuse(err)
	}
	if !dir {
		return nil
	}
	// A mount inside src can put dst below it; rename(2) says EXDEV before
	// it would say EINVAL, and the copy would then walk into itself.
	srcParent, err := filepath.EvalSymlinks(filepath.Dir(src))
	if err != nil {
		return err
	}
	dstParent, err := filepath.EvalSymlinks(filepath.Dir(dst))
	if err != nil {
		return err
	}
	if strings.HasPrefix(dstParent+"/", filepath.Join(srcParent, filepath.Base(src))+"/") {
		return refuse(unix.EINVAL)
	}
	var st unix.Stat_t
	err = unix.Lstat(dst, &st)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return &fs.PathError{Op: "lstat", Path: dst, Err: err}
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return refuse(unix.ENOTDIR)
	}
	return nil
}

// fileID names an inode.
type fileID struct{ dev, ino uint64 }

// copier recreates a tree on another filesystem.
type copier struct {
	ctx   context.Context
	links map[fileID]string // first copy of each source file with several links
}

// copy recreates src, whose lstat is st, at dst, which does not exist, and
// gives it src's attributes. Hard links within the tree stay links.
func (c *copier) copy(src, dst string, st *unix.Stat_t) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	var err error
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if st.Nlink > 1 {
			id := fileID{dev: uint64(st.Dev), ino: st.Ino}
			if first, ok := c.links[id]; ok && os.Link(first, dst) == nil {
				return nil // the inode has its attributes already
			}
			c.links[id] = dst
		}
		err = copyFile(src, dst)
	case unix.S_IFDIR:
		err = c.copyDir(src, dst)
	case unix.S_IFLNK:
		var target string
		if target, err = os.Readlink(src); err == nil {
			err = os.Symlink(target, dst)
		}
	case unix.S_IFIFO:
		if err = unix.Mkfifo(dst, 0o600); err != nil {
			err = &fs.PathError{Op: "mkfifo", Path: dst, Err: err}
		}
	default:
		return &unmovableError{path: src, mode: st.Mode}
	}
	if err != nil {
		return err
	}
	return copyAttrs(src, dst, st)
}

// copyDir creates dst and copies src's entries into it. dst stays private
// to the agent until its own mode is set: a 0700 source must not be open
// to others while it is being copied.
func (c *copier) copyDir(src, dst string) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		from := filepath.Join(src, e.Name())
		var st unix.Stat_t
		if err := unix.Lstat(from, &st); err != nil {
			return &fs.PathError{Op: "lstat", Path: from, Err: err}
		}
		if err := c.copy(from, filepath.Join(dst, e.Name()), &st); err != nil {
			return err
		}
	}
	return nil
}

// copyFile streams src's contents into a new file dst; os.File.ReadFrom
// lets the kernel copy (copy_file_range) where it can.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyAttrs gives dst the user xattrs, owner, mode and times of src, whose
// lstat is st. The order matters: chown clears setuid and setgid, and the
// steps before the times change only ctime.
func copyAttrs(src, dst string, st *unix.Stat_t) error {
	typ := st.Mode & unix.S_IFMT
	if typ == unix.S_IFREG || typ == unix.S_IFDIR { // Linux allows user xattrs on nothing else
		if err := copyUserXattrs(src, dst); err != nil {
			return err
		}
	}
	// A user moving another's file cannot give the copy away; like mv, the
	// copy then stays the mover's.
	if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil && !errors.Is(err, fs.ErrPermission) {
		return err
	}
	if typ != unix.S_IFLNK { // a symlink's mode is fixed
		if err := unix.Chmod(dst, st.Mode&0o7777); err != nil {
			return &fs.PathError{Op: "chmod", Path: dst, Err: err}
		}
	}
	times := []unix.Timespec{st.Atim, st.Mtim}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, dst, times, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "utimes", Path: dst, Err: err}
	}
	return nil
}

// copyUserXattrs copies src's user.* extended attributes, among them the
// SDK's metadata. A target filesystem without xattrs cannot keep them, so
// they are dropped, as mv drops them.
func copyUserXattrs(src, dst string) error {
	names, err := xattrNames(src, "user.")
	if errors.Is(err, ErrMetadataUnsupported) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range names {
		val, err := getxattr(src, name)
		if errors.Is(err, unix.ENODATA) {
			continue // removed since we listed it
		}
		if err != nil {
			return fmt.Errorf("read xattr %s of %s: %w", name, src, err)
		}
		err = classifyXattr(unix.Setxattr(dst, name, []byte(val), 0))
		if errors.Is(err, ErrMetadataUnsupported) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("set xattr %s of %s: %w", name, dst, err)
		}
	}
	return nil
}

// unmovableError reports an entry a move across filesystems refuses to
// recreate: a device node would grant access to a device wherever it is
// put, and a socket copied is a dead file, its listener bound to the old.
type unmovableError struct {
	path string
	mode uint32 // the entry's st_mode
}

func (e *unmovableError) Error() string {
	kind := "special file"
	switch e.mode & unix.S_IFMT {
	case unix.S_IFCHR:
		kind = "character device"
	case unix.S_IFBLK:
		kind = "block device"
	case unix.S_IFSOCK:
		kind = "socket"
	}
	return fmt.Sprintf("'%s' is a %s, which cannot be moved to another filesystem", e.path, kind)
}
