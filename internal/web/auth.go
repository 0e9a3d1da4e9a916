package web

import (
	"context"
	"crypto/subtle"
	"net/http"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// CookieName is the session cookie's name over plain HTTP; over TLS it
// is HostCookieName.
const CookieName = "warren_dashboard"

// HostCookieName is the session cookie's name over TLS. A browser takes a
// __Host- cookie only from the host itself, Secure, with Path=/ and no
// Domain, so a sandbox's page on a subdomain (<port>-<id>.<domain>)
// cannot set one that the dashboard would take for its session.
const HostCookieName = "__Host-" + CookieName

// sessionCookie is the session cookie as r's connection has it.
func sessionCookie(r *http.Request, value string) *http.Cookie {
	c := &http.Cookie{Name: CookieName, Value: value, Path: Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode}
	if r.TLS != nil {
		c.Name, c.Path, c.Secure = HostCookieName, "/", true
	}
	return c
}

// CSRFHeader carries a session's CSRF token on every state-changing
// request; the session answer (GET /dashboard/api/session) gives it.
const CSRFHeader = "X-Warren-CSRF"

// LoginTTL is how long a login link of `warren dashboard` stays valid.
const LoginTTL = 10 * time.Minute

// hashToken is what the store keeps of a login or session token.
func hashToken(t string) string { return sandbox.HashAPIKey(t) }

// CreateLogin stores a fresh single-use login token for team, valid for
// LoginTTL from now, and returns it; the login URL carries it.
func CreateLogin(ctx context.Context, st Store, team string, now time.Time) (string, error) {
	token := sandbox.NewToken()
	if err := st.CreateDashboardLogin(ctx, hashToken(token), team, now.Add(LoginTTL)); err != nil {
		return "", err
	}
	return token, nil
}

// LoginURL is the address of the login page for base (the server's
// http(s)://host:port) and token. The token is in the fragment, which a
// browser never sends: the page posts it, so neither logs, proxies nor
// link previews see (and use up) it.
func LoginURL(base, token string) string {
	return base + Prefix + "login#token=" + token
}

// loginRequest logs in with a login link's token or an API key.
type loginRequest struct {
	Token  string `json:"token,omitempty"`
	APIKey string `json:"apiKey,omitempty"`
}

// sessionInfo answers login and GET /dashboard/api/session.
type sessionInfo struct {
	TeamID    string    `json:"teamId"`
	TeamName  string    `json:"teamName"`
	CSRF      string    `json:"csrfToken"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Operator is true for the server's operator (a login link, or single
	// sign-on with the operator claim), who may use the operator's API
	// (operator.go).
	Operator bool `json:"operator"`
}

// login makes a session from a login token or an API key. It takes JSON
// only: a cross-site form cannot send that without a preflight, which
// this server never grants, so no other site can log a browser into a
// session of its choosing.
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	if err := s.doLogin(w, r); err != nil {
		writeError(w, err)
	}
}

func (s *server) doLogin(w http.ResponseWriter, r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return sandbox.Errorf(sandbox.KindInvalid, "login takes a JSON body (Content-Type: application/json)")
	}
	var req loginRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	ctx := r.Context()
	var team string
	switch {
	case req.Token != "" && req.APIKey != "":
		return sandbox.Errorf(sandbox.KindInvalid, "give a login token or an API key, not both")
	case req.Token != "":
		t, err := s.st.UseDashboardLogin(ctx, hashToken(req.Token), s.now())
		if err != nil {
			return err
		}
		team = t
	case req.APIKey != "":
		t, err := s.keys.Team(ctx, req.APIKey)
		if err != nil {
			return err
		}
		team = t
	default:
		return sandbox.Errorf(sandbox.KindInvalid, "give a login token or an API key")
	}
	tm, err := s.st.GetTeam(ctx, team)
	if err != nil {
		return err
	}
	ds, err := s.startSession(ctx, w, r, team, req.Token != "")
	if err != nil {
		return err
	}
	s.log.Info("dashboard login", logkey.Team, team, "by", map[bool]string{true: "link", false: "key"}[req.Token != ""])
	writeJSON(w, http.StatusOK, sessionInfo{TeamID: team, TeamName: tm.Name, CSRF: ds.CSRF, ExpiresAt: ds.ExpiresAt, Operator: ds.Operator})
	return nil
}

// startSession stores a new session of team and sets its cookie.
func (s *server) startSession(ctx context.Context, w http.ResponseWriter, r *http.Request, team string, operator bool) (sandbox.DashboardSession, error) {
	token, now := sandbox.NewToken(), s.now()
	ds := sandbox.DashboardSession{Hash: hashToken(token), TeamID: team, CSRF: sandbox.NewToken(),
		CreatedAt: now, ExpiresAt: now.Add(s.cfg.SessionTTL), Operator: operator}
	if err := s.st.CreateDashboardSession(ctx, ds); err != nil {
		return sandbox.DashboardSession{}, err
	}
	c := sessionCookie(r, token)
	c.Expires, c.MaxAge = ds.ExpiresAt, int(s.cfg.SessionTTL/time.Second)
	http.SetCookie(w, c)
	return ds, nil
}

// logout ends the request's session, if any, and clears the cookie. It
// needs the CSRF token like every state change, so that another site
// cannot log a user out.
func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	ds, err := s.session(r)
	if err == nil {
		err = checkCSRF(r, ds)
	}
	if err == nil {
		err = s.st.DeleteDashboardSession(r.Context(), ds.Hash)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	c := sessionCookie(r, "")
	c.MaxAge = -1
	http.SetCookie(w, c)
	w.WriteHeader(http.StatusNoContent)
}

// session returns the request's unexpired session.
func (s *server) session(r *http.Request) (sandbox.DashboardSession, error) {
	c, err := r.Cookie(sessionCookie(r, "").Name)
	if err != nil || c.Value == "" {
		return sandbox.DashboardSession{}, sandbox.Errorf(sandbox.KindUnauthenticated, "not logged in to the dashboard")
	}
	return s.st.DashboardSessionByHash(r.Context(), hashToken(c.Value), s.now())
}

// checkCSRF refuses a state-changing request without the session's CSRF
// token in CSRFHeader. SameSite=Strict already keeps the cookie off
// cross-site requests; the token is the second lock.
func checkCSRF(r *http.Request, ds sandbox.DashboardSession) error {
	got := r.Header.Get(CSRFHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(ds.CSRF)) != 1 {
		return sandbox.Errorf(sandbox.KindForbidden, "missing or wrong %s header (reload the dashboard)", CSRFHeader)
	}
	return nil
}

// teamHandler serves a request of a logged-in session's team.
type teamHandler func(w http.ResponseWriter, r *http.Request, team string) error

// authed wraps h: no session is 401, and a request other than GET or
// HEAD without the session's CSRF token is 403.
func (s *server) authed(h teamHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ds, err := s.session(r)
		if err == nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
			err = checkCSRF(r, ds)
		}
		if err == nil {
			err = h(w, r, ds.TeamID)
		}
		if err != nil {
			if sandbox.KindOf(err) == sandbox.KindInternal {
				s.log.Error("dashboard request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			writeError(w, err)
		}
	})
}
