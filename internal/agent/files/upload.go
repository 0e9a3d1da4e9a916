package files

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/klauspost/compress/gzip"

	"github.com/warrenhq/warren/internal/agent/filesystem"
	"github.com/warrenhq/warren/internal/agent/users"
)

// uploaded describes one written file in the upload response.
type uploaded struct {
	Path     string            `json:"path"`
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// upload serves POST /files: a raw octet-stream body to `path`, or every
// `file` part of a multipart body, each to `path` or its own filename.
func (h *Handler) upload(w http.ResponseWriter, r *http.Request) {
	u, abs, err := h.target(r, OperationWrite)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	md, err := parseMetadata(r.Header)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	body, err := requestBody(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer body.Close()
	ctype := r.Header.Get("Content-Type")
	media, params, err := mime.ParseMediaType(ctype)
	if err != nil && ctype != "" {
		h.fail(w, r, errorf(http.StatusBadRequest, "invalid Content-Type '%s'", ctype))
		return
	}
	var res []uploaded
	switch {
	case media == "application/octet-stream":
		if r.URL.Query().Get("path") == "" {
			h.fail(w, r, errorf(http.StatusBadRequest, "path query parameter is required for application/octet-stream uploads"))
			return
		}
		var one uploaded
		one, err = h.writeFile(u, abs, body, md)
		res = []uploaded{one}
	case strings.HasPrefix(media, "multipart/"):
		if params["boundary"] == "" {
			h.fail(w, r, errorf(http.StatusBadRequest, "multipart Content-Type has no boundary"))
			return
		}
		res, err = h.writeParts(r, u, multipart.NewReader(body, params["boundary"]), md)
	default:
		err = errorf(http.StatusBadRequest, "unsupported Content-Type '%s' (use application/octet-stream or multipart/form-data)", ctype)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

// writeParts writes every `file` part in order. A path written twice in
// one request is refused: the second write would silently win.
func (h *Handler) writeParts(r *http.Request, u *users.User, mr *multipart.Reader, md map[string]string) ([]uploaded, error) {
	query := r.URL.Query().Get("path")
	seen := map[string]bool{}
	res := []uploaded{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, bodyError(err, "malformed multipart body")
		}
		if part.FormName() != "file" {
			continue
		}
		dest := query
		if dest == "" {
			dest = partFilename(part)
		}
		if dest == "" {
			return nil, errorf(http.StatusBadRequest, "file part has no filename and the request no path query parameter")
		}
		abs, err := h.resolve(u, dest)
		if err != nil {
			return nil, err
		}
		if seen[abs] {
			return nil, errorf(http.StatusBadRequest, "path '%s' is uploaded more than once in one request", abs)
		}
		seen[abs] = true
		// A part can be cut short by a malformed body: still the client's
		// fault, so its read errors are tagged like the body's.
		one, err := h.writeFile(u, abs, bodyReader{part}, md)
		if err != nil {
			return nil, err
		}
		res = append(res, one)
	}
	if len(res) == 0 {
		return nil, errorf(http.StatusBadRequest, "multipart body has no part named 'file'")
	}
	return res, nil
}

// partFilename is the part's filename as sent. Part.FileName keeps only the
// base name, but the SDK sends the whole target path there.
func partFilename(p *multipart.Part) string {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// errRequestBody marks failures reading what the client sent, which are
// the client's fault (400), apart from failures writing the file.
var errRequestBody = errors.New("reading request body")

// bodyReader tags every read error with errRequestBody (once).
type bodyReader struct{ r io.Reader }

func (b bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, errRequestBody) {
		err = fmt.Errorf("%w: %w", errRequestBody, err)
	}
	return n, err
}

func bodyError(err error, what string) error {
	if errors.Is(err, errRequestBody) {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	return errorf(http.StatusBadRequest, "%s: %v", what, err)
}

// requestBody undoes the request's Content-Encoding (gzip or none).
func requestBody(r *http.Request) (io.ReadCloser, error) {
	raw := io.NopCloser(bodyReader{r.Body})
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return raw, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bodyReader{r.Body})
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "invalid gzip request body: %v", err)
		}
		return io.NopCloser(bodyReader{zr}), nil
	default:
		return nil, errorf(http.StatusBadRequest, "unsupported Content-Encoding '%s' (only gzip is supported)", enc)
	}
}

// copyBufs holds the buffers uploads stream through: large enough that a
// big upload costs few write syscalls, pooled so idle ones cost nothing.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// writeFile streams src into abs for u: parents created, existing content
// truncated, metadata replaced. What exists is reached as u (see
// users.User.Do), so the kernel refuses what u may not do, through
// symlinks too; a file u creates is u's. Missing parents are the
// exception: see makeParents.
func (h *Handler) writeFile(u *users.User, abs string, src io.Reader, md map[string]string) (uploaded, error) {
	created, err := makeParents(u, filepath.Dir(abs))
	if err != nil {
		removeDirs(created)
		if errors.Is(err, syscall.ENOTDIR) {
			return uploaded{}, errorf(http.StatusBadRequest, "a parent of path '%s' is not a directory", abs)
		}
		return uploaded{}, writeFailure(abs, err)
	}
	var f *os.File
	if err := u.Do(func() (err error) { f, err = createFile(u, abs); return err }); err != nil {
		removeDirs(created)
		return uploaded{}, err
	}
	buf := copyBufs.Get().(*[]byte)
	err = copyFull(f, src, *buf)
	copyBufs.Put(buf)
	if err == nil {
		// On the open file, not the path: the path may point elsewhere by now.
		err = filesystem.WriteMetadataFile(f, md)
		if errors.Is(err, filesystem.ErrMetadataUnsupported) {
			h.log.Warn("filesystem cannot store file metadata; ignoring it", "path", abs, "err", err)
			err = nil
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if errors.Is(err, errRequestBody) {
			return uploaded{}, bodyError(err, "upload")
		}
		return uploaded{}, writeFailure(abs, err)
	}
	return uploaded{Path: abs, Name: filepath.Base(abs), Type: "file", Metadata: md}, nil
}

// makeParents creates dir's missing directories for u and returns those it
// made. E2B's agent makes them itself, whoever asks, and hands them to the
// user: its SDKs' suites write "/0/file" as user, where / is root's. So does
// this one, as root, when the nearest existing ancestor is named without
// symlinks, so that what the agent makes is where the caller said (no
// process in the sandbox can redirect it) and whoever holds the access
// token could make it anyway (commands run as root). Behind a symlink the
// directories are made as u, and the kernel decides.
func makeParents(u *users.User, dir string) ([]string, error) {
	existing, err := filesystem.ExistingAncestor(dir)
	if err != nil {
		return nil, err
	}
	if existing != "" && existing != dir {
		if real, err := filepath.EvalSymlinks(existing); err == nil && real == existing {
			return filesystem.MkdirAllAs(dir, u.UID, u.GID)
		}
	}
	var created []string
	err = u.Do(func() (err error) { created, err = filesystem.MkdirAllAs(dir, u.UID, u.GID); return err })
	return created, err
}

// removeDirs removes the directories a refused write made, deepest first,
// so a refusal changes nothing; one that is no longer empty stays.
func removeDirs(dirs []string) {
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i])
	}
}

// createFile opens abs, whose parents exist, for writing, truncated.
// O_NONBLOCK keeps a FIFO without a reader from blocking the open;
// anything but a regular file is then refused.
func createFile(u *users.User, abs string) (*os.File, error) {
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		return nil, errorf(http.StatusBadRequest, "path '%s' is a directory", abs)
	}
	f, err := os.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NONBLOCK, 0o666)
	if err != nil {
		return nil, writeFailure(abs, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errorf(http.StatusBadRequest, "path '%s' is not a regular file", abs)
	}
	if err == nil {
		err = touchOwner(f, fi, u)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// touchOwner chowns f, which u owns, to u: a chown that changes nothing.
// E2B's agent chowns what it writes, and watchers count on the attribute
// event (create, chmod, write) that it makes.
func touchOwner(f *os.File, fi os.FileInfo, u *users.User) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == u.UID && st.Gid == u.GID {
		return f.Chown(int(u.UID), int(u.GID))
	}
	return nil
}

// copyFull copies src to dst, filling buf before each write. Readers like
// multipart parts hand out 4 KiB at a time; writing each piece as it comes
// costs a syscall per 4 KiB and halves upload throughput.
func copyFull(dst io.Writer, src io.Reader, buf []byte) error {
	for {
		n, err := io.ReadFull(src, buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		// Compared with ==: ReadFull returns these sentinels bare for a
		// clean end, while a truncated body arrives wrapped (bodyReader)
		// and must fail.
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// writeFailure maps a failed write of abs to its answer.
func writeFailure(abs string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return errorf(http.StatusInsufficientStorage, "not enough disk space to write '%s'", abs)
	case errors.Is(err, syscall.EISDIR):
		return errorf(http.StatusBadRequest, "path '%s' is a directory", abs)
	case errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.EINVAL):
		return errorf(http.StatusBadRequest, "invalid path '%s'", abs)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return errorf(http.StatusForbidden, "cannot write '%s': %v", abs, errnoOf(err))
	case errors.Is(err, fs.ErrNotExist):
		// The parents exist by now: a dangling symlink, or a filesystem
		// that creates nothing (procfs).
		return errorf(http.StatusBadRequest, "cannot create '%s': %v", abs, errnoOf(err))
	case errors.Is(err, syscall.ENXIO):
		return errorf(http.StatusBadRequest, "path '%s' is not a regular file", abs)
	default:
		return fmt.Errorf("write %s: %w", abs, err)
	}
}
