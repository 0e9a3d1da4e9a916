package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/agentclient"
	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
	"github.com/warrenhq/warren/internal/volume"
)

// clock is a settable time for expiries.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type testWeb struct {
	srv      *httptest.Server
	st       *sqlite.DB
	m        *lifecycle.Manager
	clock    *clock
	key      string // a stored key of the default team
	otherKey string // a stored key of team "other"
	vols     *volume.Service
}

// newWeb starts the dashboard on a fake engine; opts change its Config.
func newWeb(t *testing.T, opts ...func(*Config)) *testWeb {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	evs := events.New(events.Config{Store: st, AllowPrivate: true})
	evs.Start(ctx)
	t.Cleanup(evs.Close)
	set := lifecycle.DefaultSettings()
	set.WarmPool, set.WarmPoolCodeInterpreter = 0, 0
	m, err := lifecycle.New(lifecycle.Deps{Runtime: fake.New("warren/base"), Agent: fake.NewAgent(), Store: st, Events: evs}, set)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	w := &testWeb{st: st, m: m, clock: &clock{t: time.Now()}, key: sandbox.NewAPIKey(), otherKey: sandbox.NewAPIKey()}
	st.PutTeam(ctx, sandbox.Team{ID: "other", Name: "other"})
	for i, k := range []struct{ key, team string }{{w.key, sandbox.DefaultTeamID}, {w.otherKey, "other"}} {
		if err := st.CreateAPIKey(ctx, sandbox.APIKey{ID: string(rune('a' + i)), TeamID: k.team, Hash: sandbox.HashAPIKey(k.key), Mask: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	w.vols, err = volume.New(ctx, volume.Config{Store: st, Dir: filepath.Join(dir, "volumes"), KeyFile: filepath.Join(dir, "volume.key")})
	if err != nil {
		t.Fatal(err)
	}
	// Volumes are mounts (nosuid binds): they go before the directory.
	t.Cleanup(func() {
		left, _ := st.ListAllVolumes(ctx)
		for _, v := range left {
			w.vols.Delete(ctx, v.TeamID, v.ID)
		}
	})
	cfg := Config{Manager: m, Store: st, Events: evs, Info: ServerInfo{StateDir: "/var/lib/warren"}, Terminals: agentclient.New(), Screens: agentclient.New(), Files: agentclient.New(), Volumes: w.vols, Now: w.clock.now, Poll: 20 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	w.srv = httptest.NewServer(New(cfg))
	t.Cleanup(w.srv.Close)
	return w
}

// client is a browser: its cookie and CSRF token.
type client struct {
	cookie string
	csrf   string
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (w *testWeb) do(t *testing.T, c *client, method, path string, body any) resp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, w.srv.URL+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c != nil {
		if c.cookie != "" {
			req.AddCookie(&http.Cookie{Name: CookieName, Value: c.cookie})
		}
		if c.csrf != "" {
			req.Header.Set(CSRFHeader, c.csrf)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, b}
}

// login logs in with body and returns the client, failing the test
// unless it succeeds.
func (w *testWeb) login(t *testing.T, body loginRequest) *client {
	t.Helper()
	r := w.do(t, nil, "POST", "/dashboard/api/login", body)
	if r.status != http.StatusOK {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	var info sessionInfo
	json.Unmarshal(r.body, &info)
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == CookieName {
			return &client{cookie: c.Value, csrf: info.CSRF}
		}
	}
	t.Fatalf("login set no %s cookie: %v", CookieName, r.header)
	return nil
}

func (w *testWeb) create(t *testing.T, team string) string {
	t.Helper()
	sb, err := w.m.Create(context.Background(), lifecycle.CreateRequest{TeamID: team, Template: "base", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return sb.ID
}

func TestLoginLinkIsSingleUse(t *testing.T) {
	w := newWeb(t)
	token, err := CreateLogin(context.Background(), w.st, sandbox.DefaultTeamID, w.clock.now())
	if err != nil {
		t.Fatal(err)
	}
	c := w.login(t, loginRequest{Token: token})
	if r := w.do(t, c, "GET", "/dashboard/api/session", nil); r.status != http.StatusOK || !strings.Contains(string(r.body), `"teamId":"default"`) {
		t.Fatalf("session: %d %s", r.status, r.body)
	}
	if r := w.do(t, nil, "POST", "/dashboard/api/login", loginRequest{Token: token}); r.status != http.StatusUnauthorized {
		t.Fatalf("second use of a login link: %d %s, want 401", r.status, r.body)
	}
}

func TestLoginLinkExpires(t *testing.T) {
	w := newWeb(t)
	token, err := CreateLogin(context.Background(), w.st, sandbox.DefaultTeamID, w.clock.now())
	if err != nil {
		t.Fatal(err)
	}
	w.clock.add(LoginTTL + time.Second)
	if r := w.do(t, nil, "POST", "/dashboard/api/login", loginRequest{Token: token}); r.status != http.StatusUnauthorized {
		t.Fatalf("expired login link: %d %s, want 401", r.status, r.body)
	}
}

func TestLoginRefusals(t *testing.T) {
	w := newWeb(t)
	for _, tc := range []struct {
		name string
		body any
		ct   string
		want int
	}{
		{"unknown token", loginRequest{Token: "00ff"}, "application/json", http.StatusUnauthorized},
		{"wrong key", loginRequest{APIKey: sandbox.NewAPIKey()}, "application/json", http.StatusUnauthorized},
		{"malformed key", loginRequest{APIKey: "nope"}, "application/json", http.StatusUnauthorized},
		{"both", loginRequest{Token: "00", APIKey: w.key}, "application/json", http.StatusBadRequest},
		{"neither", loginRequest{}, "application/json", http.StatusBadRequest},
		{"form post", loginRequest{APIKey: w.key}, "application/x-www-form-urlencoded", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := json.Marshal(tc.body)
			res, err := http.Post(w.srv.URL+"/dashboard/api/login", tc.ct, bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Fatalf("status %d %s, want %d", res.StatusCode, body, tc.want)
			}
			var e httpedge.Body
			if json.Unmarshal(body, &e) != nil || e.Code != tc.want || e.Message == "" {
				t.Errorf("body %s is not a {code, message} error", body)
			}
			if len(res.Cookies()) != 0 {
				t.Errorf("a refused login set cookies: %v", res.Cookies())
			}
		})
	}
}

func TestCookieFlags(t *testing.T) {
	w := newWeb(t)
	r := w.do(t, nil, "POST", "/dashboard/api/login", loginRequest{APIKey: w.key})
	cs := (&http.Response{Header: r.header}).Cookies()
	if len(cs) != 1 {
		t.Fatalf("cookies %v", cs)
	}
	c := cs[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != Prefix || c.Secure {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=%s, not Secure over plain HTTP", c, Prefix)
	}
	if c.MaxAge <= 0 || c.MaxAge > int((12*time.Hour).Seconds()) {
		t.Errorf("cookie MaxAge %d", c.MaxAge)
	}

	// Under TLS the cookie is Secure.
	tls := httptest.NewTLSServer(w.srv.Config.Handler)
	defer tls.Close()
	b, _ := json.Marshal(loginRequest{APIKey: w.key})
	res, err := tls.Client().Post(tls.URL+"/dashboard/api/login", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if cs := res.Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Errorf("cookie over TLS %v: want Secure", cs)
	}
}

func TestNoSessionNothingServed(t *testing.T) {
	w := newWeb(t)
	id := w.create(t, sandbox.DefaultTeamID)
	if r := w.do(t, nil, "GET", "/dashboard/api/session", nil); r.status != http.StatusNoContent {
		t.Errorf("session without one: %d %s, want 204", r.status, r.body)
	}
	for _, p := range []string{"/dashboard/api/sandboxes", "/dashboard/api/sandboxes/stream",
		"/dashboard/api/sandboxes/" + id, "/dashboard/api/sandboxes/" + id + "/logs/stream", "/dashboard/api/keys",
		"/dashboard/api/server", "/dashboard/api/snapshots", "/dashboard/api/templates"} {
		for _, c := range []*client{nil, {cookie: "0123"}} {
			if r := w.do(t, c, "GET", p, nil); r.status != http.StatusUnauthorized || strings.Contains(string(r.body), id) && !strings.Contains(p, id) {
				t.Errorf("GET %s with cookie %v: %d %s, want 401", p, c, r.status, r.body)
			}
		}
	}
	if r := w.do(t, nil, "POST", "/dashboard/api/sandboxes/"+id+"/kill", nil); r.status != http.StatusUnauthorized {
		t.Errorf("kill without session: %d", r.status)
	}
	if _, err := w.m.Get(context.Background(), sandbox.DefaultTeamID, id); err != nil {
		t.Errorf("the sandbox is gone: %v", err)
	}
}

func TestSessionExpiresAndLogoutEndsIt(t *testing.T) {
	w := newWeb(t)
	c := w.login(t, loginRequest{APIKey: w.key})
	w.clock.add(12*time.Hour + time.Second)
	if r := w.do(t, c, "GET", "/dashboard/api/sandboxes", nil); r.status != http.StatusUnauthorized {
		t.Fatalf("expired session: %d", r.status)
	}
	c = w.login(t, loginRequest{APIKey: w.key})
	if r := w.do(t, &client{cookie: c.cookie}, "POST", "/dashboard/api/logout", nil); r.status != http.StatusForbidden {
		t.Fatalf("logout without CSRF token: %d, want 403", r.status)
	}
	if r := w.do(t, c, "POST", "/dashboard/api/logout", nil); r.status != http.StatusNoContent {
		t.Fatalf("logout: %d %s", r.status, r.body)
	}
	if r := w.do(t, c, "GET", "/dashboard/api/sandboxes", nil); r.status != http.StatusUnauthorized {
		t.Fatalf("after logout: %d, want 401", r.status)
	}
}

func TestCSRFRefused(t *testing.T) {
	w := newWeb(t)
	id := w.create(t, sandbox.DefaultTeamID)
	c := w.login(t, loginRequest{APIKey: w.key})
	for _, bad := range []string{"", "wrong", strings.Repeat("0", 64)} {
		r := w.do(t, &client{cookie: c.cookie, csrf: bad}, "POST", "/dashboard/api/sandboxes/"+id+"/kill", nil)
		if r.status != http.StatusForbidden {
			t.Errorf("kill with CSRF token %q: %d %s, want 403", bad, r.status, r.body)
		}
		r = w.do(t, &client{cookie: c.cookie, csrf: bad}, "POST", "/dashboard/api/keys", map[string]string{"name": "x"})
		if r.status != http.StatusForbidden {
			t.Errorf("create key with CSRF token %q: %d, want 403", bad, r.status)
		}
	}
	if _, err := w.m.Get(context.Background(), sandbox.DefaultTeamID, id); err != nil {
		t.Fatalf("a refused kill killed: %v", err)
	}
	if r := w.do(t, c, "POST", "/dashboard/api/sandboxes/"+id+"/kill", nil); r.status != http.StatusNoContent {
		t.Fatalf("kill with the token: %d %s", r.status, r.body)
	}
	if _, err := w.m.Get(context.Background(), sandbox.DefaultTeamID, id); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("after kill: %v", err)
	}
}

func TestTeamScoping(t *testing.T) {
	w := newWeb(t)
	mine := w.create(t, sandbox.DefaultTeamID)
	theirs := w.create(t, "other")
	c := w.login(t, loginRequest{APIKey: w.key})
	r := w.do(t, c, "GET", "/dashboard/api/sandboxes", nil)
	if !strings.Contains(string(r.body), mine) || strings.Contains(string(r.body), theirs) {
		t.Fatalf("list %s: want %s and not %s", r.body, mine, theirs)
	}
	for _, p := range []string{"", "/metrics", "/logs/stream", "/files", "/files/download?path=/etc/passwd"} {
		if r := w.do(t, c, "GET", "/dashboard/api/sandboxes/"+theirs+p, nil); r.status != http.StatusNotFound {
			t.Errorf("GET another team's sandbox%s: %d %s, want 404", p, r.status, r.body)
		}
	}
	for _, a := range []string{"pause", "kill", "snapshot", "resume", "files/upload?path=/tmp/x"} {
		if r := w.do(t, c, "POST", "/dashboard/api/sandboxes/"+theirs+"/"+a, nil); r.status != http.StatusNotFound {
			t.Errorf("%s another team's sandbox: %d %s, want 404", a, r.status, r.body)
		}
	}
	if _, err := w.m.Get(context.Background(), "other", theirs); err != nil {
		t.Fatalf("the other team's sandbox was touched: %v", err)
	}
	// Keys: only the team's own are listed, another's cannot be revoked.
	r = w.do(t, c, "GET", "/dashboard/api/keys", nil)
	if !strings.Contains(string(r.body), `"id":"a"`) || strings.Contains(string(r.body), `"id":"b"`) {
		t.Errorf("keys %s: want a, not b", r.body)
	}
	if r := w.do(t, c, "DELETE", "/dashboard/api/keys/b", nil); r.status != http.StatusNotFound {
		t.Errorf("revoke another team's key: %d, want 404", r.status)
	}
	if _, err := w.st.APIKeyByHash(context.Background(), sandbox.HashAPIKey(w.otherKey)); err != nil {
		t.Errorf("the other team's key is gone: %v", err)
	}
	// A session of the other team sees its own sandbox only.
	o := w.login(t, loginRequest{APIKey: w.otherKey})
	r = w.do(t, o, "GET", "/dashboard/api/sandboxes", nil)
	if strings.Contains(string(r.body), mine) || !strings.Contains(string(r.body), theirs) {
		t.Errorf("other team's list %s", r.body)
	}
}

func TestKeysCreatedShownOnceAndRevoked(t *testing.T) {
	w := newWeb(t)
	c := w.login(t, loginRequest{APIKey: w.key})
	r := w.do(t, c, "POST", "/dashboard/api/keys", map[string]string{"name": "ci"})
	if r.status != http.StatusCreated {
		t.Fatalf("create key: %d %s", r.status, r.body)
	}
	var k keyJSON
	json.Unmarshal(r.body, &k)
	if !sandbox.ValidAPIKey(k.Key) {
		t.Fatalf("created key %q", k.Key)
	}
	r = w.do(t, c, "GET", "/dashboard/api/keys", nil)
	if strings.Contains(string(r.body), k.Key) || !strings.Contains(string(r.body), k.ID) {
		t.Fatalf("list shows the key or lacks it: %s", r.body)
	}
	w.login(t, loginRequest{APIKey: k.Key}) // the new key works
	if r := w.do(t, c, "DELETE", "/dashboard/api/keys/"+k.ID, nil); r.status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if r := w.do(t, nil, "POST", "/dashboard/api/login", loginRequest{APIKey: k.Key}); r.status != http.StatusUnauthorized {
		t.Fatalf("revoked key logs in: %d", r.status)
	}
}

func TestActions(t *testing.T) {
	w := newWeb(t)
	id := w.create(t, sandbox.DefaultTeamID)
	c := w.login(t, loginRequest{APIKey: w.key})
	before, _ := w.m.Get(context.Background(), sandbox.DefaultTeamID, id)
	if r := w.do(t, c, "POST", "/dashboard/api/sandboxes/"+id+"/timeout", actionBody{Seconds: 600}); r.status != http.StatusNoContent {
		t.Fatalf("extend: %d %s", r.status, r.body)
	}
	after, _ := w.m.Get(context.Background(), sandbox.DefaultTeamID, id)
	if d := after.EndAt.Sub(before.EndAt); d < 9*time.Minute {
		t.Errorf("extend by 600 s moved the end by %s", d)
	}
	if r := w.do(t, c, "POST", "/dashboard/api/sandboxes/"+id+"/timeout", actionBody{Seconds: -1}); r.status != http.StatusBadRequest {
		t.Errorf("extend by -1: %d", r.status)
	}
	if r := w.do(t, c, "POST", "/dashboard/api/sandboxes/"+id+"/pause", nil); r.status != http.StatusNoContent {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	if sb, _ := w.m.Get(context.Background(), sandbox.DefaultTeamID, id); sb.State != sandbox.StatePaused {
		t.Fatalf("after pause: %s", sb.State)
	}
	if r := w.do(t, c, "POST", "/dashboard/api/sandboxes/"+id+"/resume", nil); r.status != http.StatusOK {
		t.Fatalf("resume: %d %s", r.status, r.body)
	}
	if sb, _ := w.m.Get(context.Background(), sandbox.DefaultTeamID, id); sb.State != sandbox.StateRunning {
		t.Fatalf("after resume: %s", sb.State)
	}
	r := w.do(t, c, "GET", "/dashboard/api/sandboxes/"+id+"/events", nil)
	for _, typ := range []string{"created", "updated", "paused", "resumed"} {
		if !strings.Contains(string(r.body), "sandbox.lifecycle."+typ) {
			t.Errorf("events %s lack %s", r.body, typ)
		}
	}
}

// readEvents streams the server-sent events of path to the returned
// channel, until ctx ends.
func (w *testWeb) readEvents(t *testing.T, ctx context.Context, c *client, path string) <-chan string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", w.srv.URL+path, nil)
	req.AddCookie(&http.Cookie{Name: CookieName, Value: c.cookie})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, res.Header.Get("Content-Type"))
	}
	out := make(chan string)
	go func() {
		defer res.Body.Close()
		defer close(out)
		buf := make([]byte, 64<<10)
		var acc string
		for {
			n, err := res.Body.Read(buf)
			acc += string(buf[:n])
			for {
				i := strings.Index(acc, "\n\n")
				if i < 0 {
					break
				}
				select {
				case out <- acc[:i]:
				case <-ctx.Done():
					return
				}
				acc = acc[i+2:]
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}

// TestLogsStream: a sandbox's log comes as "logs" events, and a line
// written after the stream opened comes too.
func TestLogsStream(t *testing.T) {
	w := newWeb(t)
	id := w.create(t, sandbox.DefaultTeamID)
	c := w.login(t, loginRequest{APIKey: w.key})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs := w.readEvents(t, ctx, c, "/dashboard/api/sandboxes/"+id+"/logs/stream")
	if ev := <-evs; !strings.HasPrefix(ev, "event: logs\n") {
		t.Fatalf("first event %q", ev)
	}
	if err := w.m.Pause(context.Background(), sandbox.DefaultTeamID, id, true); err != nil {
		t.Fatal(err)
	}
	for ev := range evs {
		if strings.Contains(ev, "paus") {
			return
		}
	}
	t.Fatal("no log line of the pause came")
}

// TestListStreamsKill reads the list's server-sent events: a kill is in
// the next one.
func TestListStreamsKill(t *testing.T) {
	w := newWeb(t)
	id := w.create(t, sandbox.DefaultTeamID)
	c := w.login(t, loginRequest{APIKey: w.key})
	req, _ := http.NewRequest("GET", w.srv.URL+"/dashboard/api/sandboxes/stream", nil)
	req.AddCookie(&http.Cookie{Name: CookieName, Value: c.cookie})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := make(chan string)
	go func() {
		buf := make([]byte, 64<<10)
		var acc string
		for {
			n, err := res.Body.Read(buf)
			acc += string(buf[:n])
			for {
				i := strings.Index(acc, "\n\n")
				if i < 0 {
					break
				}
				events <- acc[:i]
				acc = acc[i+2:]
			}
			if err != nil {
				close(events)
				return
			}
		}
	}()
	if ev := <-events; !strings.HasPrefix(ev, "event: sandboxes\n") || !strings.Contains(ev, id) {
		t.Fatalf("first event %q", ev)
	}
	if r := w.do(t, c, "POST", "/dashboard/api/sandboxes/"+id+"/kill", nil); r.status != http.StatusNoContent {
		t.Fatal(r.status)
	}
	for ev := range events {
		if strings.HasPrefix(ev, "event: sandboxes\n") {
			if strings.Contains(ev, id) {
				t.Fatalf("event after kill still lists it: %q", ev)
			}
			return
		}
	}
	t.Fatal("stream ended without a list after the kill")
}

func TestStaticAssets(t *testing.T) {
	w := newWeb(t)
	for _, p := range []string{"/dashboard/", "/dashboard/sandboxes/i123", "/dashboard/login"} {
		r := w.do(t, nil, "GET", p, nil)
		if r.status != http.StatusOK || !strings.Contains(string(r.body), `<div id="app">`) {
			t.Errorf("GET %s: %d", p, r.status)
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
	}
	if r := w.do(t, nil, "GET", "/dashboard/assets/nope.js", nil); r.status != http.StatusNotFound {
		t.Errorf("missing asset: %d", r.status)
	}
	if r := w.do(t, nil, "GET", "/dashboard/api/nope", nil); r.status != http.StatusNotFound {
		t.Errorf("unknown API path: %d", r.status)
	}
}

// TestSocketsNeedCSRFAndOrigin: the WebSocket handshakes of the terminal
// and the screen are GETs, so they need the CSRF token (query) and this
// server's Origin besides the session.
func TestSocketsNeedCSRFAndOrigin(t *testing.T) {
	w := newWeb(t)
	id := w.create(t, sandbox.DefaultTeamID)
	theirs := w.create(t, "other")
	c := w.login(t, loginRequest{APIKey: w.key})
	host := strings.TrimPrefix(w.srv.URL, "http://")
	for _, tc := range []struct {
		name, path, id, csrf, origin string
		noSession                    bool
		want                         int
	}{
		{"terminal: no csrf", "terminal", id, "", "http://" + host, false, http.StatusForbidden},
		{"terminal: wrong csrf", "terminal", id, "bad", "http://" + host, false, http.StatusForbidden},
		{"terminal: other origin", "terminal", id, c.csrf, "http://evil.example", false, http.StatusForbidden},
		{"terminal: no origin", "terminal", id, c.csrf, "", false, http.StatusForbidden},
		{"terminal: another team's sandbox", "terminal", theirs, c.csrf, "http://" + host, false, http.StatusNotFound},
		{"screen: no session", "screen", id, c.csrf, "http://" + host, true, http.StatusUnauthorized},
		{"screen: no csrf", "screen", id, "", "http://" + host, false, http.StatusForbidden},
		{"screen: other origin", "screen", id, c.csrf, "http://evil.example", false, http.StatusForbidden},
		{"screen: another team's sandbox", "screen", theirs, c.csrf, "http://" + host, false, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", w.srv.URL+"/dashboard/api/sandboxes/"+tc.id+"/"+tc.path+"?csrf="+tc.csrf, nil)
			if !tc.noSession {
				req.AddCookie(&http.Cookie{Name: CookieName, Value: c.cookie})
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Errorf("status %d, want %d", res.StatusCode, tc.want)
			}
		})
	}
}

func TestWebhooksTeamScoped(t *testing.T) {
	w := newWeb(t)
	c := w.login(t, loginRequest{APIKey: w.key})
	r := w.do(t, c, "POST", "/dashboard/api/webhooks", map[string]any{"name": "h", "url": "http://127.0.0.1:1/x", "signatureSecret": "s"})
	if r.status != http.StatusCreated {
		t.Fatalf("create webhook: %d %s", r.status, r.body)
	}
	var h webhookJSON
	json.Unmarshal(r.body, &h)
	if strings.Contains(string(r.body), `"s"`) {
		t.Errorf("the answer shows the secret: %s", r.body)
	}
	if r := w.do(t, c, "POST", "/dashboard/api/webhooks", map[string]any{"url": "http://127.0.0.1:1/x"}); r.status != http.StatusBadRequest {
		t.Errorf("webhook without a secret: %d", r.status)
	}
	if r := w.do(t, c, "GET", "/dashboard/api/webhooks/"+h.ID+"/deliveries", nil); r.status != http.StatusOK {
		t.Errorf("deliveries: %d %s", r.status, r.body)
	}
	o := w.login(t, loginRequest{APIKey: w.otherKey})
	if r := w.do(t, o, "GET", "/dashboard/api/webhooks", nil); strings.Contains(string(r.body), h.ID) {
		t.Errorf("another team lists the webhook: %s", r.body)
	}
	for _, rq := range []struct{ method, path string }{{"GET", "/deliveries"}, {"DELETE", ""}} {
		if r := w.do(t, o, rq.method, "/dashboard/api/webhooks/"+h.ID+rq.path, nil); r.status != http.StatusNotFound {
			t.Errorf("%s another team's webhook%s: %d, want 404", rq.method, rq.path, r.status)
		}
	}
	if r := w.do(t, c, "DELETE", "/dashboard/api/webhooks/"+h.ID, nil); r.status != http.StatusNoContent {
		t.Errorf("delete: %d", r.status)
	}
}

// The volumes view: team-scoped, usage and the sandboxes that mount a
// volume listed, a mounted volume not deleted.
func TestVolumes(t *testing.T) {
	w := newWeb(t)
	c := w.login(t, loginRequest{APIKey: w.key})
	other := w.login(t, loginRequest{APIKey: w.otherKey})
	if r := w.do(t, c, "POST", "/dashboard/api/volumes", map[string]string{"name": "a/b"}); r.status != http.StatusBadRequest {
		t.Errorf("bad name: %d %s, want 400", r.status, r.body)
	}
	r := w.do(t, c, "POST", "/dashboard/api/volumes", map[string]string{"name": "work"})
	var v volumeJSON
	if json.Unmarshal(r.body, &v); r.status != http.StatusCreated || v.Name != "work" || v.ID == "" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if err := os.WriteFile(filepath.Join(w.vols.Dir(v.ID), "f"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb, err := w.m.Create(context.Background(), lifecycle.CreateRequest{TeamID: sandbox.DefaultTeamID, Template: "base", Timeout: time.Minute,
		VolumeMounts: []sandbox.VolumeMount{{Name: "work", VolumeID: v.ID, Path: "/mnt/w", Source: w.vols.Dir(v.ID)}}})
	if err != nil {
		t.Fatal(err)
	}
	var list []volumeJSON
	r = w.do(t, c, "GET", "/dashboard/api/volumes", nil)
	if json.Unmarshal(r.body, &list); len(list) != 1 || list[0].UsedBytes != 5 || list[0].LimitBytes != 0 ||
		len(list[0].MountedBy) != 1 || list[0].MountedBy[0] != (lifecycle.VolumeUse{SandboxID: sb.ID, Path: "/mnt/w"}) {
		t.Fatalf("list: %d %s, want the volume with 5 bytes used, mounted by %s", r.status, r.body, sb.ID)
	}
	if r := w.do(t, other, "GET", "/dashboard/api/volumes", nil); string(bytes.TrimSpace(r.body)) != "[]" {
		t.Errorf("another team lists %s", r.body)
	}
	if r := w.do(t, other, "DELETE", "/dashboard/api/volumes/"+v.ID, nil); r.status != http.StatusNotFound {
		t.Errorf("another team's delete: %d %s, want 404", r.status, r.body)
	}
	if r := w.do(t, c, "DELETE", "/dashboard/api/volumes/"+v.ID, nil); r.status != http.StatusConflict || !strings.Contains(string(r.body), sb.ID) {
		t.Errorf("delete while mounted: %d %s, want 409 naming the sandbox", r.status, r.body)
	}
	if err := w.m.Kill(context.Background(), sandbox.DefaultTeamID, sb.ID); err != nil {
		t.Fatal(err)
	}
	if r := w.do(t, c, "DELETE", "/dashboard/api/volumes/"+v.ID, nil); r.status != http.StatusNoContent {
		t.Errorf("delete: %d %s, want 204", r.status, r.body)
	}
	if _, err := os.Stat(w.vols.Dir(v.ID)); !os.IsNotExist(err) {
		t.Errorf("volume dir after delete: %v", err)
	}
}
