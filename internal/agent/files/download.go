package files

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/klauspost/compress/gzip"
)

// download serves GET /files: the file's bytes, gzipped when the client
// prefers it, with Range and conditional requests served uncompressed.
func (h *Handler) download(w http.ResponseWriter, r *http.Request) {
	u, abs, err := h.target(r, OperationRead)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var f *os.File
	if err := u.Do(func() (err error) { f, err = openRead(abs); return err }); err != nil {
		h.fail(w, r, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if fi.IsDir() {
		h.fail(w, r, errorf(http.StatusBadRequest, "path '%s' is a directory", abs))
		return
	}
	if !fi.Mode().IsRegular() {
		h.fail(w, r, errorf(http.StatusBadRequest, "path '%s' is not a regular file", abs))
		return
	}
	// The first bytes are read before anything is answered: a file that
	// refuses to be read (/proc/self/mem) then gets an error, not a 200 cut
	// short, and they name the type of a file without a known extension.
	head := make([]byte, 512)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		h.fail(w, r, readError(abs, fi.Size() == 0, err))
		return
	}
	head = head[:n]
	ctype := mime.TypeByExtension(filepath.Ext(abs))
	if ctype == "" {
		ctype = http.DetectContentType(head)
	}
	// A regular file of size 0 with bytes in it is made up as it is read
	// (procfs, sysfs): it has no size to serve ranges of, nor one to seek.
	pseudo := fi.Size() == 0 && n > 0

	hdr := w.Header()
	hdr.Add("Vary", "Accept-Encoding")
	hdr.Set("Content-Disposition", contentDisposition(filepath.Base(abs)))
	hdr.Set("Content-Type", ctype)
	enc, ok := chooseEncoding(r.Header.Values("Accept-Encoding"), wantsIdentity(r) && !pseudo, fi.Size())
	if !ok {
		writeError(w, http.StatusNotAcceptable, "no acceptable content encoding (supported: gzip, identity)")
		return
	}
	if enc == "identity" && !pseudo {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			h.fail(w, r, err)
			return
		}
		http.ServeContent(w, r, filepath.Base(abs), fi.ModTime(), f)
		return
	}
	body := io.MultiReader(bytes.NewReader(head), f)
	hdr.Set("Last-Modified", fi.ModTime().UTC().Format(http.TimeFormat))
	if enc == "identity" {
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			if _, err := io.Copy(w, body); err != nil {
				h.log.Warn("download interrupted", "path", abs, "err", err)
			}
		}
		return
	}
	hdr.Set("Content-Encoding", "gzip")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// BestSpeed: the bottleneck of a sandbox download is the agent's CPU,
	// and the ratio gained by harder levels is small for typical files.
	// klauspost's gzip stores incompressible blocks as they are (5x the
	// standard library's speed on random bytes), which the client then
	// also decodes for free.
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if _, err := io.Copy(zw, body); err != nil {
		h.log.Warn("gzip download interrupted", "path", abs, "err", err)
		return
	}
	if err := zw.Close(); err != nil {
		h.log.Warn("gzip download interrupted", "path", abs, "err", err)
	}
}

// openRead opens abs for reading without blocking on a FIFO that has no
// writer: the caller refuses anything but regular files once it has seen
// what it opened. O_NONBLOCK changes nothing for regular files.
func openRead(abs string) (*os.File, error) {
	f, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, openError(abs, err)
	}
	return f, nil
}

// readError maps a failed first read of abs. A pseudo-file (size 0, like
// /proc/self/mem) that refuses reads is the request's mistake, not the
// agent's.
func readError(abs string, pseudo bool, err error) error {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return errorf(http.StatusForbidden, "permission denied for path '%s'", abs)
	case errors.Is(err, syscall.EISDIR):
		return errorf(http.StatusBadRequest, "path '%s' is a directory", abs)
	case pseudo:
		return errorf(http.StatusBadRequest, "path '%s' cannot be read: %v", abs, errnoOf(err))
	default:
		return fmt.Errorf("read %s: %w", abs, err)
	}
}

// errnoOf strips the *fs.PathError around err, so that a message names the
// path once.
func errnoOf(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// openError maps a failed open of abs to the answer envd gives.
func openError(abs string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return errorf(http.StatusNotFound, "path '%s' does not exist", abs)
	case errors.Is(err, fs.ErrPermission):
		return errorf(http.StatusForbidden, "permission denied for path '%s'", abs)
	case errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.ELOOP):
		return errorf(http.StatusBadRequest, "invalid path '%s': %v", abs, errors.Unwrap(err))
	case errors.Is(err, syscall.ENXIO):
		return errorf(http.StatusBadRequest, "path '%s' is not a regular file", abs)
	default:
		return fmt.Errorf("open %s: %w", abs, err)
	}
}

// wantsIdentity reports whether the request's Range or validators only make
// sense on the uncompressed bytes.
func wantsIdentity(r *http.Request) bool {
	for _, h := range []string{"Range", "If-Range", "If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"} {
		if r.Header.Get(h) != "" {
			return true
		}
	}
	return false
}

// unaskedGzipMax is the size under which a file goes gzip to any client
// that accepts it, as envd sends it: compressing it costs next to nothing,
// and old SDKs read an empty identity body (Content-Length: 0) as a string
// whatever the format asked.
const unaskedGzipMax = 64 << 10

// chooseEncoding picks gzip or identity for a file of size bytes from
// Accept-Encoding values, with q-values and "*". Files from unaskedGzipMax
// up go gzip only when the client asks for it: it names gzip above every
// other coding it names (the SDK's gzip option sends "gzip" alone). A list
// of what a client can decode, all at one rank ("gzip, deflate": Node's
// fetch and browsers send it unasked), leaves the choice to the server, and
// identity wins it: compressing on the fly costs the sandbox more CPU than
// the bytes cost the link, and undici decodes large gzip bodies slowly.
// Gzip is also sent when identity is refused.
func chooseEncoding(values []string, identityOnly bool, size int64) (string, bool) {
	q := map[string]float64{}
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(item), ";")
			name = strings.ToLower(strings.TrimSpace(name))
			if name == "" {
				continue
			}
			q[name] = qValue(params)
		}
	}
	star, hasStar := q["*"]
	identity, explicit := q["identity"]
	if !explicit {
		// Identity is acceptable unless refused, but it only competes with
		// gzip when the client ranks it.
		identity = 1
		if hasStar && star == 0 {
			identity = 0
		}
	}
	gz, named := q["gzip"]
	if !named {
		gz, named = q["x-gzip"]
	}
	if !named {
		gz = star // absent and no "*" leaves 0
	}
	rival := 0.0
	for name, v := range q {
		switch name {
		case "gzip", "x-gzip", "identity", "*":
		default:
			rival = max(rival, v)
		}
	}
	asked := named && gz > rival
	switch {
	case identityOnly && identity > 0:
		return "identity", true
	case identityOnly:
		return "", false
	case gz > 0 && (gz >= identity || !explicit) && (asked || size < unaskedGzipMax):
		return "gzip", true
	case identity > 0:
		return "identity", true
	case gz > 0:
		return "gzip", true
	default:
		return "", false
	}
}

// qValue reads q= from the parameters of one Accept-Encoding item; a
// missing or malformed q counts as 1, as lenient servers do.
func qValue(params string) float64 {
	for p := range strings.SplitSeq(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f >= 0 && f <= 1) { // NaN too: it compares false with everything
			return 1
		}
		return f
	}
	return 1
}

// contentDisposition names the file for browsers; names outside printable
// ASCII use the RFC 2231 form.
func contentDisposition(name string) string {
	for _, c := range []byte(name) {
		if c < 0x20 || c > 0x7e {
			return mime.FormatMediaType("inline", map[string]string{"filename": name})
		}
	}
	return `inline; filename="` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name) + `"`
}
