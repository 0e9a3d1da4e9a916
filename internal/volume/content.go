package volume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/sandbox"
)

// ContentPrefix is where the content API is served.
const ContentPrefix = "/volumecontent/"

// EntryStat is E2B's VolumeEntryStat.
type EntryStat struct {
	Name   string    `json:"name"`
	Type   string    `json:"type"` // file, directory, symlink, unknown
	Path   string    `json:"path"` // from the volume's root, with a leading /
	Size   int64     `json:"size"`
	Mode   uint32    `json:"mode"`
	UID    uint32    `json:"uid"`
	GID    uint32    `json:"gid"`
	Atime  time.Time `json:"atime"`
	Mtime  time.Time `json:"mtime"`
	Ctime  time.Time `json:"ctime"`
	Target string    `json:"target,omitempty"` // a symlink's target
}

// Handler returns the content API, E2B's /volumecontent/{volumeID}/path,
// dir and file, authenticated by the volume's token (Bearer). With Claims
// the request is answered from where the volume's claim is.
func (s *Service) Handler() http.Handler {
	if s.claims != nil {
		mux := http.NewServeMux()
		mux.HandleFunc(ContentPrefix+"{volumeID}/{op}", func(w http.ResponseWriter, r *http.Request) {
			v, err := s.authorize(r)
			if err == nil {
				err = s.claims.ServeContent(w, r, v.ID)
			}
			if err != nil {
				writeError(w, err)
			}
		})
		return mux
	}
	return ContentHandler(ContentPrefix, func(r *http.Request) (*os.Root, error) {
		v, err := s.authorize(r)
		if err != nil {
			return nil, err
		}
		root, err := os.OpenRoot(s.Dir(v.ID))
		if err != nil {
			return nil, fmt.Errorf("open volume %s: %w", v.ID, err)
		}
		return root, nil
	})
}

// authorize returns the volume of the request's path when its token
// grants it.
func (s *Service) authorize(r *http.Request) (sandbox.Volume, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return sandbox.Volume{}, sandbox.Errorf(sandbox.KindUnauthenticated, "missing volume token (Authorization: Bearer)")
	}
	return s.Verify(r.Context(), r.PathValue("volumeID"), token)
}

// ContentHandler serves the content API's operations at
// prefix+"{volumeID}/path", "/dir" and "/file" on the root open gives for
// a request (which it closes): the control plane's own volumes, and on
// Kubernetes the node agent's (the volumes of its node), whose callers
// are checked before open. Errors are E2B's {code, message}; a full
// volume is 413.
func ContentHandler(prefix string, open func(r *http.Request) (*os.Root, error)) http.Handler {
	mux := http.NewServeMux()
	routes := []struct {
		method, op string
		h          func(w http.ResponseWriter, r *http.Request, root *os.Root, p string) error
	}{
		{"GET", "path", stat},
		{"PATCH", "path", updateMetadata},
		{"DELETE", "path", remove},
		{"GET", "dir", list},
		{"POST", "dir", makeDir},
		{"GET", "file", readFile},
		{"PUT", "file", writeFile},
	}
	for _, rt := range routes {
		mux.HandleFunc(rt.method+" "+prefix+"{volumeID}/"+rt.op, func(w http.ResponseWriter, r *http.Request) {
			if err := serveOp(w, r, open, rt.h); err != nil {
				writeError(w, err)
			}
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, sandbox.Errorf(sandbox.KindNotFound, "%s %s not found", r.Method, r.URL.Path))
	})
	return mux
}

func serveOp(w http.ResponseWriter, r *http.Request, open func(*http.Request) (*os.Root, error),
	h func(http.ResponseWriter, *http.Request, *os.Root, string) error) error {
	root, err := open(r)
	if err != nil {
		return err
	}
	defer root.Close()
	p, err := CleanPath(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	return h(w, r, root, p)
}

// CleanPath turns a client's path into one relative to the volume's root
// ("." for the root). ".." cannot climb above the root; symlinks are
// confined by os.Root, which refuses to leave the volume.
func CleanPath(p string) (string, error) {
	if p == "" {
		return "", sandbox.Errorf(sandbox.KindInvalid, "path is required")
	}
	if strings.ContainsRune(p, 0) {
		return "", sandbox.Errorf(sandbox.KindInvalid, "invalid path %q", p)
	}
	c := strings.TrimPrefix(path.Clean("/"+p), "/")
	if c == "" {
		return ".", nil
	}
	return c, nil
}

// fsError gives an *os.Root error its kind, never the host path.
func fsError(err error, p string) error {
	shown := "/" + strings.TrimPrefix(p, ".")
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return sandbox.Errorf(sandbox.KindNotFound, "path %s not found", shown)
	case errors.Is(err, fs.ErrExist):
		return sandbox.Errorf(sandbox.KindConflict, "path %s already exists", shown)
	case errors.Is(err, syscall.ENOTDIR):
		return sandbox.Errorf(sandbox.KindInvalid, "a parent of %s is not a directory", shown)
	case errors.Is(err, syscall.EISDIR):
		return sandbox.Errorf(sandbox.KindInvalid, "path %s is a directory", shown)
	case errors.Is(err, syscall.ENOTEMPTY):
		return sandbox.Errorf(sandbox.KindConflict, "directory %s is not empty", shown)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return &full{path: shown}
	case strings.Contains(err.Error(), "escapes from parent"):
		return sandbox.Errorf(sandbox.KindInvalid, "path %s leads out of the volume", shown)
	}
	return fmt.Errorf("volume path %s: %w", shown, err)
}

func entryStat(root *os.Root, p string) (EntryStat, error) {
	fi, err := root.Lstat(p)
	if err != nil {
		return EntryStat{}, fsError(err, p)
	}
	e := EntryStat{Name: fi.Name(), Path: "/" + strings.TrimPrefix(p, "."), Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), Mtime: fi.ModTime().UTC()}
	if p == "." {
		e.Name, e.Path = "", "/"
	}
	switch {
	case fi.Mode().IsRegular():
		e.Type = "file"
	case fi.IsDir():
		e.Type = "directory"
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = "symlink"
		e.Target, _ = root.Readlink(p)
	default:
		e.Type = "unknown"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.UID, e.GID = st.Uid, st.Gid
		e.Atime = time.Unix(st.Atim.Sec, st.Atim.Nsec).UTC()
		e.Ctime = time.Unix(st.Ctim.Sec, st.Ctim.Nsec).UTC()
	}
	return e, nil
}

func stat(w http.ResponseWriter, r *http.Request, root *os.Root, p string) error {
	e, err := entryStat(root, p)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusOK, e)
	return nil
}

// owner is the uid, gid and mode a request may set; nil = leave.
type owner struct {
	UID  *uint32 `json:"uid"`
	GID  *uint32 `json:"gid"`
	Mode *uint32 `json:"mode"`
}

func ownerQuery(r *http.Request) (owner, error) {
	var o owner
	q := r.URL.Query()
	for _, f := range []struct {
		name string
		dst  **uint32
	}{{"uid", &o.UID}, {"gid", &o.GID}, {"mode", &o.Mode}} {
		if v := q.Get(f.name); v != "" {
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return owner{}, sandbox.Errorf(sandbox.KindInvalid, "invalid %s %q", f.name, v)
			}
			u := uint32(n)
			*f.dst = &u
		}
	}
	return o, nil
}

func (o owner) apply(root *os.Root, p string) error {
	if o.Mode != nil {
		if *o.Mode > 0o7777 {
			return sandbox.Errorf(sandbox.KindInvalid, "invalid mode %o", *o.Mode)
		}
		if err := root.Chmod(p, fs.FileMode(*o.Mode&0o777)|modeBits(*o.Mode)); err != nil {
			return fsError(err, p)
		}
	}
	if o.UID != nil || o.GID != nil {
		uid, gid := -1, -1
		if o.UID != nil {
			uid = int(*o.UID)
		}
		if o.GID != nil {
			gid = int(*o.GID)
		}
		if err := root.Lchown(p, uid, gid); err != nil {
			return fsError(err, p)
		}
	}
	return nil
}

// modeBits maps Unix setuid, setgid and sticky bits to Go's.
func modeBits(m uint32) fs.FileMode {
	var out fs.FileMode
	if m&0o4000 != 0 {
		out |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	return out
}

func updateMetadata(w http.ResponseWriter, r *http.Request, root *os.Root, p string) error {
	var o owner
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&o); err != nil {
		return sandbox.Errorf(sandbox.KindInvalid, "invalid metadata body: %v", err)
	}
	if _, err := root.Lstat(p); err != nil {
		return fsError(err, p)
	}
	if err := o.apply(root, p); err != nil {
		return err
	}
	return stat(w, r, root, p)
}

func remove(w http.ResponseWriter, r *http.Request, root *os.Root, p string) error {
	if p == "." {
		return sandbox.Errorf(sandbox.KindInvalid, "the volume's root cannot be removed")
	}
	if _, err := root.Lstat(p); err != nil {
		return fsError(err, p)
	}
	if err := root.RemoveAll(p); err != nil {
		return fsError(err, p)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func list(w http.ResponseWriter, r *http.Request, root *os.Root, p string) error {
	depth := 1
	if v := r.URL.Query().Get("depth"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return sandbox.Errorf(sandbox.KindInvalid, "invalid depth %q: want a whole number of 1 or more", v)
		}
		depth = min(n, 64)
	}
	fi, err := root.Lstat(p)
	if err != nil {
		return fsError(err, p)
	}
	if !fi.IsDir() {
		return sandbox.Errorf(sandbox.KindInvalid, "path /%s is not a directory", strings.TrimPrefix(p, "."))
	}
	out := []EntryStat{}
	if err := walk(r.Context(), root, p, depth, &out); err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

// walk appends dir's entries, and theirs down to depth; symlinks are
// listed, never followed.
func walk(ctx context.Context, root *os.Root, dir string, depth int, out *[]EntryStat) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := fs.ReadDir(root.FS(), dir)
	if err != nil {
		return fsError(err, dir)
	}
	for _, de := range entries {
		p := path.Join(dir, de.Name())
		e, err := entryStat(root, p)
		if sandbox.KindOf(err) == sandbox.KindNotFound {
			continue // removed while listing
		}
		if err != nil {
			return err
		}
		*out = append(*out, e)
		if de.IsDir() && depth > 1 {
			if err := walk(ctx, root, p, depth-1, out); err != nil {
				return err
			}
		}
	}
	return nil
}

func makeDir(w http.ResponseWriter, r *http.Request, root *os.Root, p string) error {
	o, err := ownerQuery(r)
	if err != nil {
		return err
	}
	if r.URL.Query().Get("force") == "true" {
		err = root.MkdirAll(p, 0o777)
	} else {
		err = root.Mkdir(p, 0o777)
	}
	if err != nil {
		return fsError(err, p)
	}
	if o.Mode == nil {
		if err := root.Chmod(p, 0o777); err != nil {
			return fsError(err, p)
		}
	}
	if err := o.apply(root, p); err != nil {
		return err
	}
	e, err := entryStat(root, p)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusCreated, e)
	return nil
}

func readFile(w http.ResponseWriter, r *http.Request, root *os.Root, p string) error {
	f, err := root.Open(p)
	if err != nil {
		return fsError(err, p)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fsError(err, p)
	}
	if !fi.Mode().IsRegular() {
		return sandbox.Errorf(sandbox.KindInvalid, "path /%s is not a file", p)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.WriteHeader(http.StatusOK)
	io.Copy(w, f) // a client that goes away ends the copy
	return nil
}

// writeFile writes the body to a temporary file beside the target and
// renames it into place, so that a reader (or a sandbox that mounts the
// volume) sees the old content or the new, never a part.
func writeFile(w http.ResponseWriter, r *http.Request, root *os.Root, p string) error {
	if p == "." {
		return sandbox.Errorf(sandbox.KindInvalid, "the volume's root is a directory")
	}
	o, err := ownerQuery(r)
	if err != nil {
		return err
	}
	force := r.URL.Query().Get("force") == "true"
	if fi, err := root.Lstat(p); err == nil {
		if fi.IsDir() {
			return sandbox.Errorf(sandbox.KindInvalid, "path /%s is a directory", p)
		}
		if !force {
			return sandbox.Errorf(sandbox.KindConflict, "path /%s already exists; write with force to replace it", p)
		}
	}
	if dir := path.Dir(p); dir != "." {
		if err := root.MkdirAll(dir, 0o777); err != nil {
			return fsError(err, dir)
		}
	}
	tmp := path.Join(path.Dir(p), ".warren-upload-"+sandbox.NewToken()[:16])
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return fsError(err, p)
	}
	_, err = io.Copy(f, r.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && o.Mode == nil {
		// Past the server's umask: a sandbox's user (another uid) may
		// rewrite what the content API wrote, as on the sandbox's side.
		err = root.Chmod(tmp, 0o666)
	}
	if err == nil {
		err = o.apply(root, tmp)
	}
	if err == nil {
		err = root.Rename(tmp, p)
	}
	if err != nil {
		root.Remove(tmp)
		if sandbox.KindOf(err) != sandbox.KindInternal {
			return err
		}
		return fsError(err, p)
	}
	e, err := entryStat(root, p)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusCreated, e)
	return nil
}

// FilesBytes is the size of the regular files under root.
func FilesBytes(root *os.Root) (int64, error) {
	var n int64
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("volume usage: %w", err)
	}
	return n, nil
}

// full is a write past the volume's size limit (its filesystem's ENOSPC,
// EDQUOT where the host has quotas): 413, with what to do.
type full struct{ path string }

func (e *full) Error() string {
	return fmt.Sprintf("no space left in the volume for %s: it is at its size limit (--volume-size-mb); remove files from it, or write to a volume made with a larger limit", e.path)
}

// writeError writes E2B's {code, message}; internal detail stays out. A
// full volume is 413, with what to do.
func writeError(w http.ResponseWriter, err error) {
	if f := (*full)(nil); errors.As(err, &f) {
		httpedge.WriteJSON(w, http.StatusRequestEntityTooLarge, httpedge.Body{Code: http.StatusRequestEntityTooLarge, Message: f.Error()})
		return
	}
	httpedge.WriteError(w, err)
}
