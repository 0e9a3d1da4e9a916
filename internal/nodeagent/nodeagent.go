// Package nodeagent is Warren's node agent (`warren node`, a DaemonSet on
// every node of a Kubernetes cluster) and its client: what the control
// plane needs done to a sandbox's pod that the Kubernetes API cannot do.
// It freezes and thaws a pod's cgroup (a pause that keeps memory), caps
// its process count and samples its CPU and memory, found by the pod's UID
// under the host's cgroup filesystem, v1 or v2.
//
// Only Warren's control plane may call it: every request but /healthz
// carries the shared token (a Kubernetes Secret both are given) as a
// Bearer token. Errors are {"code":N,"message":"..."} as everywhere in
// Warren.
package nodeagent

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/warrenhq/warren/internal/api"
	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Port is the node agent's port on its pod's IP.
const Port = 49990

// MinTokenLen is the shortest token the agent accepts: a guessable one
// would hand any pod on the network every sandbox's freezer.
const MinTokenLen = 32

// Server serves the node agent's API.
type Server struct {
	cg    *Cgroups
	token []byte
	log   *slog.Logger
	mux   *http.ServeMux
}

// NewServer returns the API on cg, for callers presenting token.
func NewServer(cg *Cgroups, token string, log *slog.Logger) (*Server, error) {
	if len(token) < MinTokenLen {
		return nil, errors.New("the node agent's token must be at least 32 characters (make one with: openssl rand -hex 32)")
	}
	s := &Server{cg: cg, token: []byte(token), log: logkey.For(log, "nodeagent"), mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	s.mux.HandleFunc("POST /v1/pods/{uid}/freeze", s.authed(func(r *http.Request, uid string) (any, error) {
		return nil, s.cg.Freeze(r.Context(), uid)
	}))
	s.mux.HandleFunc("POST /v1/pods/{uid}/thaw", s.authed(func(r *http.Request, uid string) (any, error) {
		return nil, s.cg.Thaw(r.Context(), uid)
	}))
	s.mux.HandleFunc("GET /v1/pods/{uid}/frozen", s.authed(func(_ *http.Request, uid string) (any, error) {
		f, err := s.cg.Frozen(uid)
		return map[string]bool{"frozen": f}, err
	}))
	s.mux.HandleFunc("PUT /v1/pods/{uid}/pids-limit", s.authed(func(r *http.Request, uid string) (any, error) {
		var body struct {
			Limit int `json:"limit"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1024)).Decode(&body); err != nil {
			return nil, sandbox.Errorf(sandbox.KindInvalid, "want {\"limit\": N}")
		}
		return nil, s.cg.SetPidsLimit(uid, body.Limit)
	}))
	s.mux.HandleFunc("GET /v1/pods/{uid}/stats", s.authed(func(_ *http.Request, uid string) (any, error) {
		return s.cg.Stats(uid)
	}))
	return s, nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// authed checks the caller's token and the pod UID, runs h, and answers
// its result as JSON (204 when it has none).
func (s *Server) authed(h func(r *http.Request, uid string) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), s.token) != 1 {
			writeError(w, sandbox.Errorf(sandbox.KindUnauthenticated, "a valid node agent token is required"))
			return
		}
		uid := r.PathValue("uid")
		if !ValidUID(uid) {
			writeError(w, sandbox.Errorf(sandbox.KindInvalid, "%q is not a pod UID", uid))
			return
		}
		v, err := h(r, uid)
		if err != nil {
			s.log.WarnContext(r.Context(), "node agent request failed", "path", r.URL.Path, "err", err)
			writeError(w, err)
			return
		}
		if v == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
}

// errorBody is Warren's error shape.
type errorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, err error) {
	code := api.Status(err)
	msg := sandbox.Message(err)
	if sandbox.KindOf(err) == sandbox.KindInternal {
		msg = "the node agent failed: " + err.Error() // the caller is the control plane, which logs it
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(errorBody{Code: code, Message: msg})
}

// kindOf is the error kind of an HTTP status the agent answered.
func kindOf(status int) sandbox.Kind {
	switch status {
	case http.StatusNotFound:
		return sandbox.KindNotFound
	case http.StatusConflict:
		return sandbox.KindConflict
	case http.StatusBadRequest:
		return sandbox.KindInvalid
	case http.StatusUnauthorized:
		return sandbox.KindUnauthenticated
	case http.StatusForbidden:
		return sandbox.KindForbidden
	case http.StatusServiceUnavailable:
		return sandbox.KindUnavailable
	}
	return sandbox.KindInternal
}
