package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/sso"
)

// fakeSSO is an identity provider that logs in whoever it is told to,
// for the code "good", and only for the flow it started.
type fakeSSO struct {
	id      sso.Identity
	started sso.Flow
}

func (f *fakeSSO) AuthURL(_ context.Context, fl sso.Flow, redirectURL string) (string, error) {
	f.started = fl
	return "https://idp.example/auth?state=" + url.QueryEscape(fl.State) + "&redirect_uri=" + url.QueryEscape(redirectURL), nil
}

func (f *fakeSSO) Finish(_ context.Context, fl sso.Flow, code, _ string) (sso.Identity, error) {
	if code != "good" || fl != f.started {
		return sso.Identity{}, sandbox.Errorf(sandbox.KindUnauthenticated, "the identity provider refused the login's code (try again)")
	}
	return f.id, nil
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// ssoLogin starts a login and comes back with code and the state the
// provider would send (wrongState: another); it returns the callback's
// answer and the session cookie it set, if any.
func ssoLogin(t *testing.T, w *testWeb, code string, wrongState bool) (resp, string) {
	t.Helper()
	res, err := noRedirects.Get(w.srv.URL + "/dashboard/api/sso/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound {
		t.Fatalf("login: %d, want 302", res.StatusCode)
	}
	to, _ := url.Parse(res.Header.Get("Location"))
	if to.Host != "idp.example" || to.Query().Get("redirect_uri") != w.srv.URL+"/dashboard/api/sso/callback" {
		t.Fatalf("login sent the browser to %s", to)
	}
	var flow *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == ssoCookieName {
			flow = c
		}
	}
	if flow == nil || !flow.HttpOnly || flow.SameSite != http.SameSiteLaxMode || flow.Path != "/dashboard/api/sso/" {
		t.Fatalf("login's flow cookie: %+v", flow)
	}
	state := to.Query().Get("state")
	if wrongState {
		state = sandbox.NewToken()
	}
	req, _ := http.NewRequest("GET", w.srv.URL+"/dashboard/api/sso/callback?code="+code+"&state="+state, nil)
	req.AddCookie(&http.Cookie{Name: flow.Name, Value: flow.Value})
	res, err = noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var session string
	for _, c := range res.Cookies() {
		if c.Name == CookieName {
			session = c.Value
		}
	}
	return resp{res.StatusCode, res.Header, body}, session
}

func TestSSOLogin(t *testing.T) {
	for _, tc := range []struct {
		name       string
		id         sso.Identity
		code       string
		wrongState bool
		status     int
		team       string // the session's, when status is 302
		operator   bool
		says       string // in the refusal page
	}{
		{name: "team", id: sso.Identity{Name: "alice", Teams: []string{"other"}}, code: "good", status: http.StatusFound, team: "other"},
		{name: "unknown teams ignored beside a known one", id: sso.Identity{Name: "alice", Teams: []string{"nope", "other"}}, code: "good", status: http.StatusFound, team: "other"},
		{name: "operator without a team", id: sso.Identity{Name: "olga", Operator: true}, code: "good", status: http.StatusFound, team: sandbox.DefaultTeamID, operator: true},
		{name: "operator of a team", id: sso.Identity{Name: "olga", Teams: []string{"other"}, Operator: true}, code: "good", status: http.StatusFound, team: "other", operator: true},
		{name: "no team", id: sso.Identity{Name: "nina"}, code: "good", status: http.StatusForbidden, says: "nina is in no team of this server"},
		{name: "unknown team", id: sso.Identity{Name: "ulf", Teams: []string{"nope"}}, code: "good", status: http.StatusForbidden, says: "team nope, which this server does not have"},
		{name: "several teams", id: sso.Identity{Name: "sam", Teams: []string{"other", "default"}}, code: "good", status: http.StatusForbidden, says: "several teams"},
		{name: "wrong state", id: sso.Identity{Teams: []string{"other"}}, code: "good", wrongState: true, status: http.StatusBadRequest, says: "not the one this browser started"},
		{name: "refused code", id: sso.Identity{Teams: []string{"other"}}, code: "bad", status: http.StatusUnauthorized, says: "refused the login"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idp := &fakeSSO{id: tc.id}
			w := newWeb(t, func(c *Config) { c.SSO = idp })
			r, session := ssoLogin(t, w, tc.code, tc.wrongState)
			if r.status != tc.status {
				t.Fatalf("callback: %d %s, want %d", r.status, r.body, tc.status)
			}
			if tc.status != http.StatusFound {
				if session != "" || !strings.Contains(string(r.body), tc.says) || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
					t.Fatalf("refusal: session %q, %s %q, want a page saying %q", session, r.header.Get("Content-Type"), r.body, tc.says)
				}
				return
			}
			if r.header.Get("Location") != Prefix || session == "" {
				t.Fatalf("callback went to %q with session %q", r.header.Get("Location"), session)
			}
			got := w.do(t, &client{cookie: session}, "GET", "/dashboard/api/session", nil)
			var info sessionInfo
			json.Unmarshal(got.body, &info)
			if got.status != http.StatusOK || info.TeamID != tc.team || info.Operator != tc.operator {
				t.Fatalf("session: %d %s, want team %s operator %v", got.status, got.body, tc.team, tc.operator)
			}
		})
	}
}

func TestSSOCallbackNeedsTheBrowsersFlow(t *testing.T) {
	w := newWeb(t, func(c *Config) { c.SSO = &fakeSSO{id: sso.Identity{Teams: []string{"other"}}} })
	r := w.do(t, nil, "GET", "/dashboard/api/sso/callback?code=good&state=x", nil)
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "not started in this browser") {
		t.Fatalf("callback without the flow cookie: %d %s", r.status, r.body)
	}
	r = w.do(t, nil, "GET", "/dashboard/api/sso/callback?error=access_denied&error_description=no+thanks", nil)
	if r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), "access_denied (no thanks)") {
		t.Fatalf("callback with the provider's error: %d %s", r.status, r.body)
	}
}

func TestLoginOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		sso  SSO
		want string
	}{
		{"with single sign-on", &fakeSSO{}, `{"sso":true}`},
		{"without", nil, `{"sso":false}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWeb(t, func(c *Config) { c.SSO = tc.sso })
			if r := w.do(t, nil, "GET", "/dashboard/api/login", nil); r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != tc.want {
				t.Fatalf("login options: %d %s, want %s", r.status, r.body, tc.want)
			}
			if tc.sso == nil {
				if r := w.do(t, nil, "GET", "/dashboard/api/sso/login", nil); r.status != http.StatusNotFound {
					t.Fatalf("sso login without single sign-on: %d %s", r.status, r.body)
				}
			}
		})
	}
}

func TestFlowCookieRoundTrip(t *testing.T) {
	f := sso.NewFlow()
	got, ok := decodeFlow(encodeFlow(f))
	if !ok || got != f {
		t.Fatalf("decodeFlow(encodeFlow(%+v)) = %+v, %v", f, got, ok)
	}
	for _, bad := range []string{"", "a.b", "a..c", "a.b.c.d", "..", "a.b."} {
		if _, ok := decodeFlow(bad); ok {
			t.Errorf("decodeFlow(%q) accepted", bad)
		}
	}
}

func FuzzDecodeFlow(f *testing.F) {
	f.Add(encodeFlow(sso.NewFlow()))
	f.Add("a.b.c")
	f.Add("..")
	f.Fuzz(func(t *testing.T, v string) {
		if fl, ok := decodeFlow(v); ok && encodeFlow(fl) != v {
			t.Fatalf("decodeFlow(%q) = %+v, which encodes as %q", v, fl, encodeFlow(fl))
		}
	})
}
