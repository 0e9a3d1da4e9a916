// Package api is Warren's control plane: E2B's REST API (paths, JSON
// shapes, status codes and {code, message} errors) on a net/http ServeMux,
// with X-API-KEY authentication. Handlers decode, authorise and encode;
// every state change goes through the lifecycle manager. The data-plane
// proxy is not here: cmd/warren mounts it in front of this handler.
package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/identity"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/secrets"
	"github.com/warrenhq/warren/internal/template"
	"github.com/warrenhq/warren/internal/volume"
)

// KeyLookup finds a stored API key by its hash, and teams; the store
// implements it.
type KeyLookup interface {
	httpedge.KeyStore
	GetTeam(ctx context.Context, id string) (sandbox.Team, error)
	// A team's own keys (apikeys.go).
	ListTeamAPIKeys(ctx context.Context, teamID string) ([]sandbox.APIKey, error)
	CreateAPIKey(ctx context.Context, k sandbox.APIKey) error
	RenameAPIKey(ctx context.Context, id, name string) error
	DeleteAPIKey(ctx context.Context, id string) error
}

// Config configures the API handler.
type Config struct {
	Manager *lifecycle.Manager // required
	Keys    KeyLookup          // required
	// ExtraKeys are accepted besides the stored keys, for the default
	// team (WARREN_API_KEY). nil = none.
	ExtraKeys []string
	Logger    *slog.Logger // nil = discard
	// Templates serves the template API (templates.go); nil = none.
	Templates *template.Registry
	// Events serves the lifecycle events and webhooks API (events.go);
	// nil = none.
	Events *events.Service
	// Volumes serves the volumes API (volumes.go); nil = none.
	Volumes *volume.Service
	// Secrets serves the secrets API (secrets.go) and checks the
	// placeholders of network rules; nil = no secrets API, and rules
	// that name secrets are refused.
	Secrets *secrets.Service
	// Identity serves the OIDC discovery document and JWKS of workload
	// tokens, without authentication; nil = none.
	Identity *identity.Issuer
}

// ClientID is E2B's deprecated per-node client ID; clients only need it
// to be present.
const ClientID = "6532622b"

type server struct {
	m       *lifecycle.Manager
	keys    KeyLookup
	apiKeys *httpedge.Keys
	ops     Ops
	log     *slog.Logger
	envdVer string
	tpl     *template.Registry // nil = no template API
	events  *events.Service    // nil = no events API
	vol     *volume.Service    // nil = no volumes API
	secrets *secrets.Service   // nil = no secrets API
}

// New returns the control-plane handler.
func New(cfg Config) http.Handler {
	mc := cfg.Manager.Settings()
	s := &server{m: cfg.Manager, keys: cfg.Keys, apiKeys: httpedge.NewKeys(cfg.Keys, cfg.ExtraKeys), ops: NewOps(cfg.Manager), log: logkey.For(cfg.Logger, "api"), envdVer: mc.EnvdVersion, tpl: cfg.Templates, events: cfg.Events, vol: cfg.Volumes,
		secrets: cfg.Secrets}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /metrics", s.serverMetrics)
	routes := []struct {
		pattern string
		h       handler
	}{
		{"POST /sandboxes", s.createV1},
		{"POST /v2/sandboxes", s.createV2},
		{"GET /sandboxes", s.listV1},
		{"GET /v2/sandboxes", s.listV2},
		{"GET /sandboxes/metrics", s.bulkMetrics},
		{"GET /sandboxes/{id}", s.get},
		{"DELETE /sandboxes/{id}", s.ops.Kill},
		{"POST /sandboxes/{id}/timeout", s.setTimeout},
		{"POST /sandboxes/{id}/refreshes", s.refresh},
		{"POST /sandboxes/{id}/pause", s.pause},
		{"POST /sandboxes/{id}/stop", s.stop}, // Warren's own
		{"POST /sandboxes/{id}/resume", s.resume},
		{"POST /sandboxes/{id}/connect", s.connectV1},
		{"POST /v2/sandboxes/{id}/connect", s.connectV2},
		{"PUT /sandboxes/{id}/network", s.updateNetwork},
		{"GET /sandboxes/{id}/metrics", s.metrics},
		{"GET /sandboxes/{id}/logs", s.logsV1},
		{"GET /v2/sandboxes/{id}/logs", s.logsV2},
		{"POST /sandboxes/{id}/snapshots", s.createSnapshot},
		{"GET /snapshots", s.listSnapshots},
		{"DELETE /templates/{id}", s.deleteTemplate},
		{"POST /sandboxes/{id}/fork", s.fork},
	}
	for _, rt := range routes {
		mux.Handle(rt.pattern, s.wrap(rt.h))
	}
	s.registerTemplates(mux)
	s.registerEvents(mux)
	s.registerTeams(mux)
	s.registerAPIKeys(mux)
	s.registerVolumes(mux)
	s.registerSecrets(mux)
	if cfg.Identity != nil {
		cfg.Identity.Register(mux, cfg.Logger)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowedMethods(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			httpedge.WriteJSON(w, http.StatusMethodNotAllowed, httpedge.Body{
				Code:    http.StatusMethodNotAllowed,
				Message: fmt.Sprintf("method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", ")),
			})
			return
		}
		httpedge.WriteError(w, sandbox.Errorf(sandbox.KindNotFound, "%s %s not found", r.Method, r.URL.Path))
	})
	return mux
}

// health answers 204 while the server serves, and 200 with
// {"status":"draining"} while it drains (lifecycle.Manager.SetDraining):
// still healthy, for its sandboxes are served, but taking no creates.
func (s *server) health(w http.ResponseWriter, r *http.Request) {
	if s.m.Draining() {
		httpedge.WriteJSON(w, http.StatusOK, map[string]any{"status": "draining", "draining": true})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// allowedMethods returns the methods other than r's that have a route for
// r's path. The catch-all "/" route hides the mux's own 405 answer, so
// this asks the mux again with each method.
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		other := r.WithContext(r.Context())
		other.Method = m
		if _, pattern := mux.Handler(other); pattern != "" && pattern != "/" {
			out = append(out, m)
		}
	}
	return out
}

// handler serves an authenticated request for team; a returned error is
// written in E2B's shape.
type handler func(w http.ResponseWriter, r *http.Request, team string) error

func (s *server) wrap(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		team, err := s.authenticate(r)
		if err == nil {
			// r.URL.Query() drops what it cannot decode: a filter sent as
			// metadata=%zz would silently be no filter at all.
			if _, qerr := url.ParseQuery(r.URL.RawQuery); qerr != nil {
				err = sandbox.Errorf(sandbox.KindInvalid, "invalid query string: %v", qerr)
			}
		}
		if err == nil {
			err = h(w, r, team)
		}
		if err != nil {
			if sandbox.KindOf(err) == sandbox.KindInternal {
				s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			httpedge.WriteError(w, err)
		}
	})
}

// authenticate returns the team of the request's X-API-KEY, or of an API
// key sent as E2B's clients send an access token (Authorization: Bearer).
func (s *server) authenticate(r *http.Request) (string, error) {
	key := r.Header.Get("X-API-Key")
	if key == "" {
		key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if key == "" {
		return "", sandbox.Errorf(sandbox.KindUnauthenticated, "missing X-API-KEY header")
	}
	return s.apiKeys.Team(r.Context(), key)
}

// sandboxID returns the request's validated {id} path value.
func sandboxID(r *http.Request) (string, error) {
	return sandbox.ParseID(r.PathValue("id"))
}
