// Package web is Warren's dashboard: it serves the built front end
// (web/, Preact + TypeScript built by Vite into dist/, embedded here so
// that `go build` alone makes a complete binary) at /dashboard/, and owns
// the dashboard's login flow (single-use links from `warren dashboard`,
// an API key, or single sign-on through OpenID Connect), its sessions (a cookie naming a server-side record),
// its CSRF check, and the JSON and server-sent-events API under
// /dashboard/api/ that the views read.
//
// Every API request but login needs a session, and every query is
// scoped to the session's team: another team's sandbox is not found.
// The package holds no state of sandboxes of its own: state changes go
// through lifecycle.Manager's methods as the control-plane API's do
// (those that are the API's, request and answer alike, through its own
// handlers, api.Ops), lists, metrics and logs through its queries, builds
// through the template registry, keys and sessions through the store,
// events through the events service, volumes through the volume service.
//
// Preact was chosen for the front end because it is React's component
// model and hooks in 4 kB, well kept, with no runtime dependency of its
// own; Vite builds it with a lockfile-pinned toolchain into a
// deterministic bundle, which CI compares with what is embedded.
package web

import (
	"context"
	"embed"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/api"
	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/template"
	"github.com/warrenhq/warren/internal/volume"
)

//go:embed all:dist
var dist embed.FS

// Prefix is where the dashboard is served.
const Prefix = "/dashboard/"

// Store is the part of the sandbox store the dashboard uses: keys, teams
// and its own logins and sessions. *sqlite.DB implements it.
type Store interface {
	GetTeam(ctx context.Context, id string) (sandbox.Team, error)
	APIKeyByHash(ctx context.Context, hash string) (sandbox.APIKey, error)
	CreateAPIKey(ctx context.Context, k sandbox.APIKey) error
	ListTeamAPIKeys(ctx context.Context, teamID string) ([]sandbox.APIKey, error)
	DeleteAPIKey(ctx context.Context, id string) error
	ListTeams(ctx context.Context) ([]sandbox.Team, error)
	PutTeam(ctx context.Context, t sandbox.Team) error
	SetTeamQuota(ctx context.Context, teamID string, q sandbox.Quota) error
	CreateDashboardLogin(ctx context.Context, hash, teamID string, expires time.Time) error
	UseDashboardLogin(ctx context.Context, hash string, now time.Time) (string, error)
	CreateDashboardSession(ctx context.Context, ds sandbox.DashboardSession) error
	DashboardSessionByHash(ctx context.Context, hash string, now time.Time) (sandbox.DashboardSession, error)
	DeleteDashboardSession(ctx context.Context, hash string) error
}

// Check is one line of the server view's health checks, as `warren
// doctor` would say it.
type Check struct {
	Name    string `json:"name"`
	OK      bool   `json:"ok"`
	Warning bool   `json:"warning,omitempty"` // failed, but only a feature needs it
	Message string `json:"message"`
}

// ServerInfo is what the server view shows besides the manager's stats.
type ServerInfo struct {
	Version  string `json:"version"`
	Engine   string `json:"engine"`
	StateDir string `json:"stateDir"`
	Firewall string `json:"firewall"`
	Domain   string `json:"domain"`
}

// Config configures the dashboard handler.
type Config struct {
	Manager *lifecycle.Manager // required
	Store   Store              // required
	// ExtraKeys are API keys accepted at login besides the stored ones,
	// for the default team (WARREN_API_KEY).
	ExtraKeys []string
	Templates *template.Registry // nil = no templates view
	Events    *events.Service    // nil = no events
	// Terminals opens the sandbox view's terminal; nil = none.
	Terminals Terminals
	// Screens shows a desktop sandbox's screen in its view; nil = none.
	Screens Screens
	// Files serves the sandbox view's file browser; nil = none.
	Files Files
	// Volumes feeds the volumes view; nil = none.
	Volumes *volume.Service
	// Info and Checks feed the server view; Checks may be nil.
	Info   ServerInfo
	Checks func(ctx context.Context) []Check
	// SSO logs users in through the operator's identity provider; nil =
	// no single sign-on.
	SSO SSO
	// SSORedirectURL is the address the provider sends users back to,
	// as registered there; "" = <scheme>://<request host>/dashboard/api/sso/callback.
	SSORedirectURL string
	// SessionTTL is how long a session lasts; 0 = 12 hours.
	SessionTTL time.Duration
	// Poll is how often live views look for changes; 0 = 1 second.
	Poll   time.Duration
	Logger *slog.Logger // nil = discard
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

type server struct {
	cfg    Config
	m      *lifecycle.Manager
	st     Store
	keys   *httpedge.Keys // the store's and ExtraKeys
	ops    api.Ops        // the API's handlers for what the views do alike
	log    *slog.Logger
	now    func() time.Time
	assets fs.FS
}

// New returns the handler of everything under Prefix.
func New(cfg Config) http.Handler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	assets, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	s := &server{cfg: cfg, m: cfg.Manager, st: cfg.Store, keys: httpedge.NewKeys(cfg.Store, cfg.ExtraKeys), ops: api.NewOps(cfg.Manager), log: logkey.For(cfg.Logger, "web"), now: cfg.Now, assets: assets}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /dashboard/api/login", s.loginOptions)
	mux.HandleFunc("POST /dashboard/api/login", s.login)
	mux.HandleFunc("GET "+ssoPath+"login", s.ssoLogin)
	mux.HandleFunc("GET "+ssoPath+"callback", s.ssoCallback)
	mux.HandleFunc("POST /dashboard/api/logout", s.logout)
	mux.HandleFunc("GET /dashboard/api/session", s.getSession)
	s.routes(mux)
	s.registerOperator(mux)
	mux.HandleFunc("/dashboard/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, sandbox.Errorf(sandbox.KindNotFound, "%s %s not found", r.Method, r.URL.Path))
	})
	mux.HandleFunc("/dashboard/", s.static)
	mux.HandleFunc("GET /dashboard", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
	})
	return securityHeaders(mux)
}

// securityHeaders forbids framing, sniffing and any script, style or
// connection from elsewhere: the dashboard loads only its own assets.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
		h.ServeHTTP(w, r)
	})
}

// static serves the embedded front end. Paths that are not files are the
// single-page app's own routes and get index.html; assets are named by
// their content hash, so they may be cached for good.
func (s *server) static(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, sandbox.Errorf(sandbox.KindInvalid, "method %s is not allowed on %s", r.Method, r.URL.Path))
		return
	}
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/dashboard")
	name = strings.TrimPrefix(name, "/")
	if name != "" && name != "index.html" {
		if f, err := fs.Stat(s.assets, name); err == nil && !f.IsDir() {
			if strings.HasPrefix(name, "assets/") {
				w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			}
			http.ServeFileFS(w, r, s.assets, name)
			return
		}
		if strings.HasPrefix(name, "assets/") {
			http.NotFound(w, r)
			return
		}
	}
	index, err := fs.ReadFile(s.assets, "index.html")
	if err != nil {
		http.Error(w, "the dashboard was not built into this binary (scripts/build-dashboard.sh)", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(index)
}

// The dashboard's answers are the API's, never cached: they are one
// team's.
func writeError(w http.ResponseWriter, err error) {
	w.Header().Set("Cache-Control", "no-store")
	httpedge.WriteError(w, err)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Cache-Control", "no-store")
	httpedge.WriteJSON(w, status, v)
}

// bodies reads the dashboard's request bodies: small, and only the fields
// each names.
var bodies = httpedge.Reader{Limit: 64 << 10, Strict: true}

// decode reads a required JSON body into v.
func decode(r *http.Request, v any) error {
	return bodies.DecodeRequired(r, v, "{}")
}
