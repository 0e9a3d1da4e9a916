package template

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Limits on one build context archive, so that a hostile or broken one
// (a gzip bomb, millions of entries) cannot exhaust the disk.
const (
	maxArchiveEntries = 200_000
	maxArchiveBytes   = 8 << 30 // extracted size
)

// archiveError is a build context archive Warren refuses; the message says
// which entry and why.
func archiveError(format string, args ...any) error {
	return sandbox.Errorf(sandbox.KindInvalid, "invalid build context archive: "+format, args...)
}

// CheckArchive reads a tar or tar.gz archive and returns an error for the
// first entry Extract would refuse, without writing anything.
func CheckArchive(r io.Reader) error {
	return walkArchive(r, func(*tar.Header, string, io.Reader) error { return nil })
}

// Extract unpacks a tar or tar.gz build context into dest, which must
// exist. It refuses entries that would land outside dest (absolute paths,
// "..", hard links to files not in the archive) and special files.
//
// Symbolic links are extracted as links, whatever they point to (an
// absolute path, outside the archive, nothing): they are meant for the
// image, where the engine copies them as links, and Extract never follows
// one. An entry whose parent is a link is skipped, as is the link's target
// on the host: the SDK lists the files of a linked directory after the
// link, and the image gets the link. A later entry replaces an earlier
// link instead of writing through it. Everything is written through an
// os.Root on dest besides, which refuses to leave it. On error dest may
// hold part of the archive.
func Extract(r io.Reader, dest string) error {
	root, err := os.OpenRoot(dest)
	if err != nil {
		return err
	}
	defer root.Close()
	return walkArchive(r, func(h *tar.Header, name string, body io.Reader) error {
		under, err := underLink(root, name)
		if err != nil {
			return archiveError("entry '%s': %v", h.Name, rootErr(err))
		}
		if under {
			return nil
		}
		if dir := path.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return archiveError("entry '%s': %v", h.Name, rootErr(err))
			}
		}
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if fi, err := root.Lstat(name); err == nil && !fi.IsDir() {
				root.Remove(name) // a directory replaces a file or link
			}
			if err := root.MkdirAll(name, 0o755); err != nil {
				return archiveError("entry '%s': %v", h.Name, rootErr(err))
			}
			return root.Chmod(name, mode|0o700)
		case tar.TypeReg:
			return writeFile(root, name, mode, body)
		case tar.TypeSymlink:
			root.Remove(name)
			if err := root.Symlink(h.Linkname, name); err != nil {
				return archiveError("entry '%s': %v", h.Name, rootErr(err))
			}
			return nil
		case tar.TypeLink:
			// A copy instead of a link: simpler, and the engine copies the
			// content into the image either way. Only of a regular file:
			// opening a link would follow it.
			target := path.Clean(h.Linkname)
			if fi, err := root.Lstat(target); err != nil || !fi.Mode().IsRegular() {
				return archiveError("entry '%s': hard link to '%s', which is not an earlier file of the archive", h.Name, h.Linkname)
			}
			if under, err := underLink(root, target); err != nil || under {
				return archiveError("entry '%s': hard link to '%s', which is not an earlier file of the archive", h.Name, h.Linkname)
			}
			src, err := root.Open(target)
			if err != nil {
				return archiveError("entry '%s': hard link to '%s', which is not an earlier file of the archive", h.Name, h.Linkname)
			}
			defer src.Close()
			return writeFile(root, name, mode, src)
		}
		return nil
	})
}

// underLink reports whether a directory on the way to name is a symbolic
// link (or not a directory at all, which MkdirAll then reports).
func underLink(root *os.Root, name string) (bool, error) {
	dir := path.Dir(name)
	if dir == "." {
		return false, nil
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		fi, err := root.Lstat(strings.Join(parts[:i+1], "/"))
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return true, nil
		}
	}
	return false, nil
}

func writeFile(root *os.Root, name string, mode fs.FileMode, body io.Reader) error {
	root.Remove(name) // replace an earlier entry, never write through it
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode|0o600)
	if err != nil {
		return archiveError("entry '%s': %v", name, rootErr(err))
	}
	if _, err := io.Copy(f, body); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return root.Chmod(name, mode)
}

// rootErr shortens the os.Root errors a hostile archive provokes.
func rootErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// walkArchive decompresses (when gzipped) and reads r, validates each
// entry and calls visit with its cleaned, relative name. Global headers
// are skipped.
func walkArchive(r io.Reader, visit func(h *tar.Header, name string, body io.Reader) error) error {
	br := bufio.NewReader(r)
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return archiveError("bad gzip stream: %v", err)
		}
		defer zr.Close()
		src = zr
	}
	tr := tar.NewReader(src)
	var entries int
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return archiveError("%v", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if entries++; entries > maxArchiveEntries {
			return archiveError("more than %d entries", maxArchiveEntries)
		}
		name, err := checkEntry(h)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		if h.Typeflag == tar.TypeReg {
			if total += h.Size; total > maxArchiveBytes {
				return archiveError("more than %d bytes once extracted", int64(maxArchiveBytes))
			}
		}
		if err := visit(h, name, io.LimitReader(tr, h.Size)); err != nil {
			return err
		}
	}
}

// checkEntry validates one header and returns its cleaned relative name.
func checkEntry(h *tar.Header) (string, error) {
	name, err := cleanRel(h.Name)
	if err != nil {
		return "", archiveError("entry '%s': %v", h.Name, err)
	}
	switch h.Typeflag {
	case tar.TypeDir, tar.TypeReg:
	case tar.TypeSymlink:
		// Any target: the link is for the image, and never followed here.
		if h.Linkname == "" || strings.ContainsRune(h.Linkname, 0) {
			return "", archiveError("entry '%s': symlink with an empty or invalid target", h.Name)
		}
	case tar.TypeLink:
		if _, err := cleanRel(h.Linkname); err != nil {
			return "", archiveError("entry '%s': hard link to '%s' points outside the build context", h.Name, h.Linkname)
		}
	default:
		return "", archiveError("entry '%s': unsupported type %q (only files, directories and links)", h.Name, h.Typeflag)
	}
	if h.Size < 0 {
		return "", archiveError("entry '%s': negative size", h.Name)
	}
	return name, nil
}

// cleanRel cleans a slash-separated path that must stay inside its root.
func cleanRel(p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	if strings.ContainsRune(p, 0) {
		return "", errors.New("NUL in path")
	}
	if path.IsAbs(p) || strings.HasPrefix(p, `\`) {
		return "", errors.New("absolute path")
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", errors.New("path leaves the build context ('..')")
	}
	return c, nil
}
