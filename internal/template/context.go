package template

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"
)

// One tar writer for every directory Warren archives for a build: the
// build context the registry hands the engine, and the directory
// `warren template build` uploads as a COPY step's files. The same tree
// gives the same bytes whoever writes it and whenever: owners and times
// are fixed, so the upload's hash (which names it, and lets the server
// say it has it already) and the engine's cache of a COPY see only names,
// content and modes.

// contextOptions say what differs between the archives.
type contextOptions struct {
	// modes are the modes the COPY steps set (see contextMode); nil =
	// every entry keeps its own.
	modes map[string]int64
	// skipGit leaves out directories named .git, at any depth: a
	// repository's history is no part of what a template copies from it.
	skipGit bool
}

// writeContext writes dir as the build context tar, with the modes the
// COPY steps set.
func writeContext(w io.Writer, dir string, modes map[string]int64) error {
	return writeTree(w, dir, contextOptions{modes: modes})
}

// WriteUpload writes dir as the gzipped tar a COPY step's files are
// uploaded as (E2B's SDK sends the same form), without .git directories.
func WriteUpload(w io.Writer, dir string) error {
	zw := gzip.NewWriter(w)
	if err := writeTree(zw, dir, contextOptions{skipGit: true}); err != nil {
		return err
	}
	return zw.Close()
}

// writeTree writes the tree under dir as a tar, names relative to dir,
// in PAX form (no limit on a name's length), directories named with a
// trailing '/'.
func writeTree(w io.Writer, dir string, opt contextOptions) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		if opt.skipGit && d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = path.Clean(filepath.ToSlash(rel))
		if m, ok := contextMode(opt.modes, h.Name, link != ""); ok {
			h.Mode = m & 0o7777
		}
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.ModTime, h.AccessTime, h.ChangeTime = time.Unix(0, 0), time.Time{}, time.Time{}
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
