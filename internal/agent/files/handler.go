// Package files serves GET and POST /files: downloads and uploads of file
// contents on behalf of a sandbox user, authorised by the access token or a
// signed URL. Directory operations and the metadata xattr format belong to
// the filesystem package; routing and the token middleware of other paths
// belong to the agent's HTTP server.
package files

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/warrenhq/warren/internal/agent/state"
	"github.com/warrenhq/warren/internal/agent/users"
)

// Handler is an http.Handler for GET and POST /files. It does its own
// authorisation, because /files accepts signed URLs where every other path
// needs the access token.
type Handler struct {
	st  *state.State
	log *slog.Logger
}

// New returns a handler reading the token, default user and workdir from st.
func New(st *state.State, log *slog.Logger) *Handler {
	return &Handler{st: st, log: log}
}

// ServeHTTP dispatches on the method.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		h.download(w, r)
	case http.MethodPost:
		h.upload(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed", r.Method))
	}
}

// httpError is a failure with the status and user-safe message to answer.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) error {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

// fail answers err: an httpError as it says, anything else as a logged 500
// whose detail stays in the log.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if errors.As(err, &he) {
		writeError(w, he.status, he.msg)
		return
	}
	h.log.Error("files request failed", "method", r.Method, "path", r.URL.Query().Get("path"), "err", err)
	writeError(w, http.StatusInternalServerError, "internal error")
}

// writeError writes envd's REST error body.
func writeError(w http.ResponseWriter, status int, msg string) {
	hdr := w.Header()
	hdr.Del("Content-Length")
	hdr.Del("Content-Encoding")
	hdr.Del("Content-Disposition")
	hdr.Set("Content-Type", "application/json; charset=utf-8")
	hdr.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{status, msg})
}

// target authorises the request for op and resolves its user and its
// `path` (empty meaning the default workdir).
func (h *Handler) target(r *http.Request, op string) (*users.User, string, error) {
	if err := authorize(r, op, h.st.AccessToken()); err != nil {
		return nil, "", err
	}
	q := r.URL.Query()
	name := q.Get("username")
	if name == "" {
		name = h.st.DefaultUser()
	}
	u, err := users.Lookup(name)
	if err != nil {
		return nil, "", errorf(http.StatusUnauthorized, "error looking up user '%s': %v", name, err)
	}
	abs, err := h.resolve(u, q.Get("path"))
	return u, abs, err
}

// resolve makes p absolute for u.
func (h *Handler) resolve(u *users.User, p string) (string, error) {
	abs, err := u.ResolvePath(p, h.st.DefaultWorkdir())
	if err != nil {
		return "", errorf(http.StatusBadRequest, "invalid path '%s': %v", p, err)
	}
	return abs, nil
}
