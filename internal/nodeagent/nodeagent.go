// Package nodeagent is Warren's node agent (`warren node`, a DaemonSet on
// every node of a Kubernetes cluster) and its client: what the control
// plane needs done to a sandbox's pod that the Kubernetes API cannot do.
// It freezes and thaws a pod's cgroup (a pause that keeps memory), caps
// its process count and samples its CPU and memory, found by the pod's UID
// under the host's cgroup filesystem, v1 or v2. And it keeps the node's
// images in its containerd (namespace k8s.io, where the kubelet finds
// them): it imports the tars the control plane streams to it (no registry
// needed), lists, exports and removes them, and commits a pod's container
// to a new image that a pod on the node can run at once. And it enforces
// the egress settings of the node's sandbox pods (egress.go): the egress
// gateway of internal/egress on the node's address, and an nftables table
// of its own that sends those pods' TCP and DNS there (nftables.go). And
// it serves the content of its node's local-path volumes, as the control
// plane forwards the volume content API to the node that holds a volume
// (volumes.go). And it tells the control plane every address of its host
// (addresses.go), which sandbox pods must not reach.
//
// Only Warren's control plane may call it: every request but /healthz
// carries the shared token (a Kubernetes Secret both are given) as a
// Bearer token, over HTTPS with a key derived from that token, which the
// client pins (tls.go). Errors are {"code":N,"message":"..."} as
// everywhere in Warren.
package nodeagent

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"

	"github.com/warrenhq/warren/internal/httpedge"
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
	// addrs lists the host's addresses: hostAddresses, but in tests.
	addrs func() ([]netip.Addr, error)
}

// NewServer returns the API on cg, for callers presenting token. Its
// image API answers once ServeImages gave it a store.
func NewServer(cg *Cgroups, token string, log *slog.Logger) (*Server, error) {
	if len(token) < MinTokenLen {
		return nil, errors.New("the node agent's token must be at least 32 characters (make one with: openssl rand -hex 32)")
	}
	s := &Server{cg: cg, token: []byte(token), log: logkey.For(log, "nodeagent"), mux: http.NewServeMux(), addrs: hostAddresses}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	s.mux.HandleFunc("POST /v1/pods/{uid}/freeze", s.pod(func(r *http.Request, uid string) (any, error) {
		return nil, s.cg.Freeze(r.Context(), uid)
	}))
	s.mux.HandleFunc("POST /v1/pods/{uid}/thaw", s.pod(func(r *http.Request, uid string) (any, error) {
		return nil, s.cg.Thaw(r.Context(), uid)
	}))
	s.mux.HandleFunc("GET /v1/pods/{uid}/frozen", s.pod(func(_ *http.Request, uid string) (any, error) {
		f, err := s.cg.Frozen(uid)
		return map[string]bool{"frozen": f}, err
	}))
	s.mux.HandleFunc("PUT /v1/pods/{uid}/pids-limit", s.pod(func(r *http.Request, uid string) (any, error) {
		var body struct {
			Limit int `json:"limit"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1024)).Decode(&body); err != nil {
			return nil, sandbox.Errorf(sandbox.KindInvalid, "want {\"limit\": N}")
		}
		return nil, s.cg.SetPidsLimit(uid, body.Limit)
	}))
	s.mux.HandleFunc("POST /v1/pods/{uid}/spare-agent", s.pod(func(_ *http.Request, uid string) (any, error) {
		return nil, s.cg.SpareAgent(uid)
	}))
	s.mux.HandleFunc("GET /v1/pods/{uid}/stats", s.pod(func(_ *http.Request, uid string) (any, error) {
		return s.cg.Stats(uid)
	}))
	s.serveAddresses()
	return s, nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// handler answers a request with a value (encoded as JSON; nil: 204), an
// error, or answered when it wrote the answer itself.
type handler func(w http.ResponseWriter, r *http.Request) (any, error)

// answered is what a handler that streamed its answer returns.
type answered struct{}

// authed checks the caller's token, runs h and answers its result.
func (s *Server) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.tokenOK(r) {
			writeError(w, errBadToken)
			return
		}
		v, err := h(w, r)
		if err != nil {
			s.log.WarnContext(r.Context(), "node agent request failed", "path", r.URL.Path, "err", err)
			writeError(w, err)
			return
		}
		switch v.(type) {
		case nil:
			w.WriteHeader(http.StatusNoContent)
		case answered:
		default:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(v)
		}
	}
}

// errBadToken answers a caller without the token.
var errBadToken = sandbox.Errorf(sandbox.KindUnauthenticated, "a valid node agent token is required")

// tokenOK tells whether r carries the token.
func (s *Server) tokenOK(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), s.token) == 1
}

// pod is authed for a request about the pod of the path's UID, checked.
func (s *Server) pod(h func(r *http.Request, uid string) (any, error)) http.HandlerFunc {
	return s.authed(func(_ http.ResponseWriter, r *http.Request) (any, error) {
		uid := r.PathValue("uid")
		if !ValidUID(uid) {
			return nil, sandbox.Errorf(sandbox.KindInvalid, "%q is not a pod UID", uid)
		}
		return h(r, uid)
	})
}

// writeError answers err in Warren's {code, message} shape. An internal
// error says its cause: the caller is the control plane, which logs it.
func writeError(w http.ResponseWriter, err error) {
	body := httpedge.ErrorOf(err)
	if sandbox.KindOf(err) == sandbox.KindInternal {
		body.Message = "the node agent failed: " + err.Error()
	}
	httpedge.WriteJSON(w, body.Code, body)
}
