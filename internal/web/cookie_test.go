package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Over TLS the session cookie is a __Host- one (Secure, Path=/, no
// Domain), and a cookie of the plain name, which a sandbox's subdomain
// could set for the whole domain, is no session there.
func TestHostCookieUnderTLS(t *testing.T) {
	w := newWeb(t)
	srv := httptest.NewTLSServer(w.srv.Config.Handler)
	t.Cleanup(srv.Close)
	hc := srv.Client()
	res, err := hc.Post(srv.URL+"/dashboard/api/login", "application/json", strings.NewReader(`{"apiKey": "`+w.key+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	var session *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == HostCookieName {
			session = c
		}
		if c.Name == CookieName {
			t.Errorf("a cookie of the plain name was set over TLS: %v", c)
		}
	}
	if session == nil || !session.Secure || session.Path != "/" || session.Domain != "" || !session.HttpOnly {
		t.Fatalf("session cookie %v, want %s, Secure, HttpOnly, Path=/, no Domain", session, HostCookieName)
	}
	for _, tc := range []struct {
		name   string
		cookie *http.Cookie
		want   int
	}{
		{"__Host- cookie", &http.Cookie{Name: HostCookieName, Value: session.Value}, http.StatusOK},
		{"plain name, as a subdomain could set it", &http.Cookie{Name: CookieName, Value: session.Value}, http.StatusNoContent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/dashboard/api/session", nil)
			req.AddCookie(tc.cookie)
			res, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Errorf("session answer %d, want %d", res.StatusCode, tc.want)
			}
		})
	}
}
