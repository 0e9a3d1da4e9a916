package web

import (
	"context"
	"crypto/subtle"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/sso"
)

// Single sign-on: GET /dashboard/api/sso/login sends the browser to the
// identity provider with a fresh flow (state, nonce, PKCE verifier),
// which a short-lived cookie binds to this browser; the provider sends
// it back to GET /dashboard/api/sso/callback, which checks the state
// against the cookie, has internal/sso exchange the code and verify the
// ID token, maps its claims to a team and the operator role, and makes
// the same session as the other logins. What is refused is a page that
// says why, for the browser is on a navigation, not in the app.

// SSO is the identity provider's side of a login; *sso.Provider is one.
type SSO interface {
	AuthURL(ctx context.Context, f sso.Flow, redirectURL string) (string, error)
	Finish(ctx context.Context, f sso.Flow, code, redirectURL string) (sso.Identity, error)
}

// ssoPath is where the flow's routes are, and its cookie's path.
const ssoPath = Prefix + "api/sso/"

// ssoCookieName is the flow cookie's name over plain HTTP; over TLS it
// is __Host- prefixed, as the session's.
const ssoCookieName = "warren_sso"

// ssoFlowTTL is how long a login may stay at the provider.
const ssoFlowTTL = 10 * time.Minute

// flowCookie is the flow cookie as r's connection has it. It is Lax, not
// Strict: the provider's redirect back is a navigation from another site,
// which a Strict cookie would not follow.
func flowCookie(r *http.Request, value string) *http.Cookie {
	c := &http.Cookie{Name: ssoCookieName, Value: value, Path: ssoPath, HttpOnly: true, SameSite: http.SameSiteLaxMode}
	if r.TLS != nil {
		c.Name, c.Path, c.Secure = "__Host-"+ssoCookieName, "/", true
	}
	return c
}

// The flow's three secrets are hex tokens and PKCE verifiers
// (base64url), none of which holds a dot.
func encodeFlow(f sso.Flow) string { return f.State + "." + f.Nonce + "." + f.Verifier }

func decodeFlow(v string) (sso.Flow, bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return sso.Flow{}, false
	}
	return sso.Flow{State: parts[0], Nonce: parts[1], Verifier: parts[2]}, true
}

// loginOptions answers GET /dashboard/api/login: the ways to log in
// beside a link and a key.
type loginOptions struct {
	SSO bool `json:"sso"`
}

func (s *server) loginOptions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, loginOptions{SSO: s.cfg.SSO != nil})
}

// redirectURL is the callback's address: the configured one, else this
// request's own host.
func (s *server) redirectURL(r *http.Request) string {
	if s.cfg.SSORedirectURL != "" {
		return s.cfg.SSORedirectURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + ssoPath + "callback"
}

func (s *server) ssoLogin(w http.ResponseWriter, r *http.Request) {
	if s.cfg.SSO == nil {
		s.ssoRefused(w, r, sandbox.Errorf(sandbox.KindNotFound, "single sign-on is not set up on this server (warren serve --sso-issuer)"))
		return
	}
	f := sso.NewFlow()
	to, err := s.cfg.SSO.AuthURL(r.Context(), f, s.redirectURL(r))
	if err != nil {
		s.ssoRefused(w, r, err)
		return
	}
	c := flowCookie(r, encodeFlow(f))
	c.MaxAge = int(ssoFlowTTL / time.Second)
	http.SetCookie(w, c)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, to, http.StatusFound)
}

func (s *server) ssoCallback(w http.ResponseWriter, r *http.Request) {
	// The flow is used up whatever comes of it.
	gone := flowCookie(r, "")
	gone.MaxAge = -1
	http.SetCookie(w, gone)
	if err := s.finishSSO(w, r); err != nil {
		s.ssoRefused(w, r, err)
	}
}

func (s *server) finishSSO(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.SSO == nil {
		return sandbox.Errorf(sandbox.KindNotFound, "single sign-on is not set up on this server (warren serve --sso-issuer)")
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		msg := "the identity provider refused the login: " + e
		if d := q.Get("error_description"); d != "" {
			msg += " (" + d + ")"
		}
		return sandbox.Errorf(sandbox.KindUnauthenticated, "%s", msg)
	}
	c, err := r.Cookie(flowCookie(r, "").Name)
	f, ok := sso.Flow{}, false
	if err == nil {
		f, ok = decodeFlow(c.Value)
	}
	if !ok {
		return sandbox.Errorf(sandbox.KindInvalid, "this login was not started in this browser, or took longer than %s: start it again", ssoFlowTTL)
	}
	if st := q.Get("state"); st == "" || subtle.ConstantTimeCompare([]byte(st), []byte(f.State)) != 1 {
		return sandbox.Errorf(sandbox.KindInvalid, "this login's state is not the one this browser started: start it again")
	}
	code := q.Get("code")
	if code == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "the identity provider sent no code")
	}
	ctx := r.Context()
	id, err := s.cfg.SSO.Finish(ctx, f, code, s.redirectURL(r))
	if err != nil {
		return err
	}
	team, err := s.ssoTeam(ctx, id)
	if err != nil {
		s.log.Warn("single sign-on refused", "user", id.Name, "subject", id.Subject, "teams", id.Teams, "err", err)
		return err
	}
	ds, err := s.startSession(ctx, w, r, team, id.Operator)
	if err != nil {
		return err
	}
	s.log.Info("dashboard login", logkey.Team, ds.TeamID, "by", "sso", "user", id.Name, "operator", id.Operator)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, Prefix, http.StatusFound)
	return nil
}

// ssoTeam is the team a user's session is of: the one team of this
// server the team claim names; the operator with none is the default
// team's. No team, an unknown one, or several are refused: a session is
// of one team, and it is the operator who says which exist.
func (s *server) ssoTeam(ctx context.Context, id sso.Identity) (string, error) {
	var known, unknown []string
	for _, t := range id.Teams {
		if _, err := s.st.GetTeam(ctx, t); err == nil {
			known = append(known, t)
		} else if sandbox.KindOf(err) == sandbox.KindNotFound {
			unknown = append(unknown, t)
		} else {
			return "", err
		}
	}
	switch {
	case len(known) == 1:
		return known[0], nil
	case len(known) > 1:
		return "", sandbox.Errorf(sandbox.KindForbidden, "%s belongs to several teams of this server (%s); a dashboard session is of one team: ask the operator to leave one",
			id.Name, strings.Join(known, ", "))
	case id.Operator:
		return sandbox.DefaultTeamID, nil
	case len(unknown) > 0:
		return "", sandbox.Errorf(sandbox.KindForbidden, "%s is in team %s, which this server does not have: ask the operator to make it (warren teams set)",
			id.Name, strings.Join(unknown, ", "))
	}
	return "", sandbox.Errorf(sandbox.KindForbidden, "%s is in no team of this server: the identity provider gave no team for this user; ask the operator to add you to one", id.Name)
}

var refusedPage = template.Must(template.New("refused").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Warren: login refused</title></head>
<body><main id="sso-refused">
<h1>Login refused</h1>
<p id="reason">{{.}}</p>
<p><a href="/dashboard/login">Back to the login page</a></p>
</main></body></html>
`))

// ssoRefused answers a login that cannot go on with a page saying why.
func (s *server) ssoRefused(w http.ResponseWriter, r *http.Request, err error) {
	status := map[sandbox.Kind]int{sandbox.KindInvalid: http.StatusBadRequest, sandbox.KindUnauthenticated: http.StatusUnauthorized,
		sandbox.KindForbidden: http.StatusForbidden, sandbox.KindNotFound: http.StatusNotFound, sandbox.KindUnavailable: http.StatusBadGateway}[sandbox.KindOf(err)]
	if status == 0 {
		status = http.StatusInternalServerError
		s.log.Error("single sign-on failed", "path", r.URL.Path, "err", err)
	} else if status != http.StatusForbidden {
		s.log.Warn("single sign-on refused", "path", r.URL.Path, "err", err)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	refusedPage.Execute(w, sandbox.Message(err))
}
