package e2b

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// CopyOptions configures a Copy step.
type CopyOptions struct {
	// User owns what is copied; default the template's user.
	User string
	// Mode, when not 0, is set on the copied files.
	Mode fs.FileMode
	// ForceUpload uploads the files even when the server has them already, and rebuilds the
	// step instead of reusing its cached layer.
	ForceUpload bool
	// ResolveSymlinks copies what symbolic links point to (files, and directories with what
	// they hold) instead of the links.
	ResolveSymlinks bool
}

// SetFileContext sets the directory that Copy sources are relative to; default the working
// directory of the program.
func (t *Template) SetFileContext(dir string) *Template {
	t.contextDir = dir
	return t
}

// Copy copies src (a file, a directory with all it holds, or a glob pattern; relative to the
// file context) from this machine to dest in the image. The files are read and uploaded when
// the template is built.
func (t *Template) Copy(src, dest string, opts CopyOptions) *Template {
	mode := ""
	if opts.Mode != 0 {
		mode = fmt.Sprintf("%04o", uint32(opts.Mode.Perm()))
	}
	t.steps = append(t.steps, templateStep{Type: "COPY", Args: []string{filepath.ToSlash(src), dest, opts.User, mode},
		Force: t.forceNext || opts.ForceUpload, ForceUpload: opts.ForceUpload, ResolveSymlinks: opts.ResolveSymlinks})
	return t
}

// copyFiles lists what a COPY source matches under dir, as slash paths relative to dir:
// every file, directory and link, a matched directory with everything under it. With resolve,
// a link to a directory is listed as that directory with what it holds (once: a link back
// into a directory being listed is refused as a loop).
func copyFiles(dir, src string, resolve bool) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(src)))
	if err != nil {
		return nil, invalidArg("copy source %q: %v", src, err)
	}
	if len(matches) == 0 {
		return nil, invalidArg("copy source %q matches no file in %s", src, dir)
	}
	seen := map[string]bool{}
	var walk func(p string, open map[string]bool) error
	walk = func(p string, open map[string]bool) error {
		rel, err := filepath.Rel(dir, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			return invalidArg("copy source %q leaves the file context %s", src, dir)
		}
		seen[filepath.ToSlash(rel)] = true
		fi, err := localEntry(p, resolve)
		if err != nil || !fi.IsDir() {
			return err
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return err
		}
		if open[real] {
			return invalidArg("copy source %q: the link %s leads back into a directory it is in", src, rel)
		}
		open[real] = true
		defer delete(open, real)
		entries, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := walk(filepath.Join(p, e.Name()), open); err != nil {
				return err
			}
		}
		return nil
	}
	for _, m := range matches {
		if err := walk(m, map[string]bool{}); err != nil {
			return nil, err
		}
	}
	files := make([]string, 0, len(seen))
	for f := range seen {
		files = append(files, f)
	}
	sort.Strings(files)
	return files, nil
}

// localEntry describes the entry at p: the link itself, or with resolve what a link points to.
func localEntry(p string, resolve bool) (fs.FileInfo, error) {
	if resolve {
		return os.Stat(p)
	}
	return os.Lstat(p)
}

// copyArchive packs files (from copyFiles) as a gzipped tar, and returns it with the hash that
// names it: the SHA-256 of the step's arguments and of every entry's name, mode, size and
// content (or link target), so that an unchanged source is uploaded once.
func copyArchive(dir string, step templateStep, files []string) ([]byte, string, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	h := sha256.New()
	fmt.Fprintf(h, "%q\n", step.Args)
	for _, rel := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		fi, err := localEntry(p, step.ResolveSymlinks)
		if err != nil {
			return nil, "", err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return nil, "", err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return nil, "", err
		}
		hdr.Name = rel
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = fi.ModTime().Truncate(1e9), fi.ModTime().Truncate(1e9), fi.ModTime().Truncate(1e9)
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, "", err
		}
		fmt.Fprintf(h, "%s %o %d %s\n", hdr.Name, hdr.Mode, hdr.Size, link)
		if fi.Mode().IsRegular() {
			if err := copyFileInto(p, io.MultiWriter(tw, h)); err != nil {
				return nil, "", err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), hex.EncodeToString(h.Sum(nil)), nil
}

func copyFileInto(path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// uploadCopies hashes every COPY step's files, sets the step's filesHash, and uploads the
// archives the server does not have yet.
func (c *Client) uploadCopies(ctx context.Context, t *Template, templateID string) error {
	dir := t.contextDir
	if dir == "" {
		dir = "."
	}
	for i := range t.steps {
		s := &t.steps[i]
		if s.Type != "COPY" {
			continue
		}
		files, err := copyFiles(dir, s.Args[0], s.ResolveSymlinks)
		if err != nil {
			return err
		}
		archive, hash, err := copyArchive(dir, *s, files)
		if err != nil {
			return &BuildError{Message: "packing the files of COPY " + s.Args[0] + ": " + err.Error()}
		}
		s.FilesHash = hash
		var link struct {
			Present bool              `json:"present"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		}
		path := "/templates/" + url.PathEscape(templateID) + "/files/" + hash
		if err := c.buildCall(ctx, http.MethodGet, path, nil, nil, &link); err != nil {
			return err
		}
		if link.Present && (!s.ForceUpload || link.URL == "") { // forced: when the server gives a URL
			continue
		}
		if err := c.putArchive(ctx, link.URL, link.Headers, archive); err != nil {
			return err
		}
	}
	return nil
}

// putArchive uploads a build context with its exact length (never chunked).
func (c *Client) putArchive(ctx context.Context, u string, headers map[string]string, archive []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(archive))
	if err != nil {
		return &BuildError{Message: "upload URL: " + err.Error()}
	}
	req.ContentLength = int64(len(archive))
	req.Header.Set("User-Agent", userAgent)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return transportError(ctx, err)
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		return &FileUploadError{BuildError{Message: "Failed to upload file: " + strconv.Itoa(res.StatusCode) + " " + string(b), StatusCode: res.StatusCode}}
	}
	return nil
}
