package e2b_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/sdk/go/e2b"
)

func TestCreateSendsWhatWasAsked(t *testing.T) {
	f := newFake(t)
	ctx := context.Background()
	pause, keep := true, false
	sbx, err := f.client().Create(ctx, e2b.SandboxOptions{
		Template:  "py",
		Timeout:   1500 * time.Millisecond,
		Metadata:  map[string]string{"k": "v"},
		Envs:      map[string]string{"A": "1"},
		Network:   &e2b.NetworkOptions{DenyOut: []string{e2b.AllTraffic}},
		Lifecycle: &e2b.Lifecycle{OnTimeout: "pause", KeepMemory: &keep, AutoResume: new(bool)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sbx.ID != "isbx1" || sbx.Domain != "test.local" || sbx.EnvdVersion != "0.6.13" {
		t.Errorf("sandbox = %+v", sbx)
	}
	r, body := f.last(t, "/v2/sandboxes")
	if got := r.Header.Get("X-API-KEY"); got != testKey {
		t.Errorf("X-API-KEY = %q", got)
	}
	var got map[string]any
	json.Unmarshal([]byte(body), &got)
	want := map[string]any{
		"templateID": "py", "timeout": 2.0, "metadata": map[string]any{"k": "v"}, "envVars": map[string]any{"A": "1"},
		"network": map[string]any{"denyOut": []any{"0.0.0.0/0"}}, "autoPause": pause, "autoPauseMemory": false,
		"autoResume": map[string]any{"enabled": false},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("body (-want +got):\n%s", d)
	}
}

func TestNetworkRulePlaceholders(t *testing.T) {
	f := newFake(t)
	f.mux.HandleFunc("PUT /sandboxes/isbx1/network", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	ctx := context.Background()
	rules := map[string][]e2b.NetworkRule{
		"b.example": {{Transform: &e2b.NetworkTransform{Headers: map[string]string{"X-Key": e2b.FillSecret("key")}}}},
		"a.example": {{TransformFunc: func(ids *e2b.IdentityTokens) e2b.NetworkTransform {
			return e2b.NetworkTransform{Headers: map[string]string{"Authorization": "Bearer " + ids.Token("aws")}}
		}}},
	}
	iam := map[string]e2b.IAMToken{"aws": {Audience: "sts.amazonaws.com", TokenType: "JWT-SVID"}}
	sbx, err := f.client().Create(ctx, e2b.SandboxOptions{IAM: iam, Network: &e2b.NetworkOptions{AllowOut: e2b.RuleHosts(rules), Rules: rules}})
	if err != nil {
		t.Fatal(err)
	}
	_, body := f.last(t, "/v2/sandboxes")
	for _, want := range []string{`"allowOut":["a.example","b.example"]`, `"Authorization":"Bearer ${e2b.identity.tokens.aws}"`, `"X-Key":"${e2b.secrets.key}"`} {
		if !strings.Contains(body, want) {
			t.Errorf("create body %s lacks %s", body, want)
		}
	}
	delete(iam, "aws")
	if _, err := f.client().Create(ctx, e2b.SandboxOptions{IAM: iam, Network: &e2b.NetworkOptions{Rules: rules}}); !errors.As(err, new(*e2b.InvalidArgumentError)) {
		t.Errorf("a token not registered: %v", err)
	}
	if err := sbx.UpdateNetwork(ctx, e2b.NetworkUpdate{Rules: rules}); err != nil {
		t.Fatal(err)
	}
	if _, body := f.last(t, "/sandboxes/isbx1/network"); !strings.Contains(body, "${e2b.identity.tokens.aws}") {
		t.Errorf("update body %s", body)
	}
	bad := map[string][]e2b.NetworkRule{"h": {{TransformFunc: func(ids *e2b.IdentityTokens) e2b.NetworkTransform {
		return e2b.NetworkTransform{Headers: map[string]string{"A": ids.Token("a}b")}}
	}}}}
	if err := sbx.UpdateNetwork(ctx, e2b.NetworkUpdate{Rules: bad}); !errors.As(err, new(*e2b.InvalidArgumentError)) {
		t.Errorf("a token name with a brace: %v", err)
	}
	if err := e2b.CheckPlaceholderName("secret", "a\nb"); err == nil {
		t.Error("a secret name with a control character passed")
	}
}

func TestCreateInsecureUsesV1(t *testing.T) {
	f := newFake(t)
	f.handleJSON("POST /sandboxes", http.StatusCreated, map[string]any{"sandboxID": "iv1", "envdVersion": "0.6.13"})
	no := false
	sbx, err := f.client().Create(context.Background(), e2b.SandboxOptions{Secure: &no})
	if err != nil {
		t.Fatal(err)
	}
	_, body := f.last(t, "/sandboxes")
	if sbx.ID != "iv1" || !strings.Contains(body, `"secure":false`) || !strings.Contains(body, `"templateID":"base"`) {
		t.Errorf("sandbox %s, body %s", sbx.ID, body)
	}
	if _, err := sbx.DownloadURL("a", e2b.URLOptions{Expires: time.Minute}); !errors.As(err, new(*e2b.InvalidArgumentError)) {
		t.Errorf("expiring URL of an insecure sandbox: %v", err)
	}
}

func TestLifecycleRefusedBeforeAnyRequest(t *testing.T) {
	f := newFake(t)
	yes, no := true, false
	for name, l := range map[string]e2b.Lifecycle{
		"keepMemory with kill":        {OnTimeout: "kill", KeepMemory: &yes},
		"autoResume without pause":    {AutoResume: &yes},
		"autoResume without memory":   {OnTimeout: "pause", KeepMemory: &no, AutoResume: &yes},
		"an action that is not known": {OnTimeout: "sleep"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := f.client().Create(context.Background(), e2b.SandboxOptions{Lifecycle: &l})
			if !errors.As(err, new(*e2b.InvalidArgumentError)) {
				t.Errorf("err = %v", err)
			}
		})
	}
	if n := f.count("/v2/sandboxes"); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestErrorClasses(t *testing.T) {
	f := newFake(t)
	f.mux.HandleFunc("GET /sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("id") {
		case "gone":
			apiError(w, 404, "sandbox not found")
		case "unauth":
			apiError(w, 401, "bad key")
		case "busy":
			apiError(w, 503, "no capacity")
		default:
			apiError(w, 500, "boom")
		}
	})
	c := f.client(e2b.WithRetries(0))
	ctx := context.Background()

	_, err := c.GetInfo(ctx, "gone")
	var notFound *e2b.SandboxNotFoundError
	if !errors.As(err, &notFound) || !errors.As(err, new(*e2b.NotFoundError)) || !errors.As(err, new(*e2b.SandboxError)) {
		t.Errorf("404: %T %v", err, err)
	}
	if _, err := c.GetInfo(ctx, "unauth"); !errors.As(err, new(*e2b.AuthenticationError)) || errors.As(err, new(*e2b.SandboxError)) {
		t.Errorf("401: %T %v", err, err)
	}
	if _, err := c.GetInfo(ctx, "busy"); !errors.As(err, new(*e2b.ServiceBusyError)) {
		t.Errorf("503: %T %v", err, err)
	}
	_, err = c.GetInfo(ctx, "x")
	var se *e2b.SandboxError
	if !errors.As(err, &se) || se.StatusCode != 500 || se.Message != "500: boom" {
		t.Errorf("500: %T %v", err, err)
	}
	if _, err := e2b.NewClient(e2b.WithAPIKey(""), e2b.WithAPIURL(f.URL)).GetInfo(ctx, "x"); !errors.As(err, new(*e2b.AuthenticationError)) {
		t.Errorf("no key: %v", err)
	}
}

func TestKillPauseAndTheirFalseAnswers(t *testing.T) {
	f := newFake(t)
	f.mux.HandleFunc("DELETE /sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "nonexistingsandbox" {
			apiError(w, 404, "not found")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	f.mux.HandleFunc("POST /sandboxes/{id}/pause", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "paused" {
			apiError(w, 409, "already paused")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	c := f.client()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() (bool, error)
		want bool
	}{
		{"kill", func() (bool, error) { return c.Kill(ctx, "isbx1") }, true},
		{"kill unknown", func() (bool, error) { return c.Kill(ctx, "nonexistingsandbox") }, false},
		{"pause", func() (bool, error) { return c.Pause(ctx, "isbx1", e2b.PauseOptions{}) }, true},
		{"pause paused", func() (bool, error) { return c.Pause(ctx, "paused", e2b.PauseOptions{}) }, false},
	} {
		if got, err := tc.call(); err != nil || got != tc.want {
			t.Errorf("%s = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	no := false
	c.Pause(ctx, "isbx1", e2b.PauseOptions{KeepMemory: &no})
	if _, body := f.last(t, "/sandboxes/isbx1/pause"); body != `{"memory":false}` {
		t.Errorf("pause body %s", body)
	}
}

func TestConnectAndSetTimeout(t *testing.T) {
	f := newFake(t)
	f.mux.HandleFunc("POST /v2/sandboxes/{id}/connect", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "killed" {
			apiError(w, 404, "not found")
			return
		}
		writeJSON(w, 200, map[string]any{"sandboxID": r.PathValue("id"), "envdVersion": "0.6.13", "domain": "other.local"})
	})
	f.mux.HandleFunc("POST /sandboxes/{id}/timeout", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	c := f.client()
	ctx := context.Background()
	sbx, err := c.Connect(ctx, "isbx9", e2b.ConnectOptions{Timeout: 10 * time.Second, Reboot: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, body := f.last(t, "/v2/sandboxes/isbx9/connect"); body != `{"memory":false,"timeout":10}` {
		t.Errorf("connect body %s", body)
	}
	if sbx.Domain != "other.local" || sbx.Host(8000) != "8000-isbx9.other.local" {
		t.Errorf("domain %q host %q", sbx.Domain, sbx.Host(8000))
	}
	if _, err := c.Connect(ctx, "killed", e2b.ConnectOptions{}); !errors.As(err, new(*e2b.SandboxNotFoundError)) {
		t.Errorf("connect killed: %v", err)
	}
	if err := sbx.SetTimeout(ctx, 2500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, body := f.last(t, "/sandboxes/isbx9/timeout"); body != `{"timeout":3}` {
		t.Errorf("timeout body %s", body)
	}
}

func TestListPagesAndFilters(t *testing.T) {
	f := newFake(t)
	f.mux.HandleFunc("GET /v2/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("nextToken") == "" {
			w.Header().Set("X-Next-Token", "p2")
			writeJSON(w, 200, []map[string]any{{"sandboxID": "a", "state": "running", "startedAt": "2026-01-02T03:04:05Z"}})
			return
		}
		writeJSON(w, 200, []map[string]any{{"sandboxID": "b", "state": "paused"}})
	})
	p := f.client().List(e2b.ListOptions{
		Metadata: map[string]string{"user id": "a&b=c"},
		States:   []e2b.SandboxState{e2b.StateRunning, e2b.StatePaused},
		Limit:    1,
	})
	all, err := p.All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].SandboxID != "a" || all[1].State != e2b.StatePaused || all[0].StartedAt.Year() != 2026 || p.HasNext() {
		t.Errorf("listed %+v, more %v", all, p.HasNext())
	}
	r, _ := f.last(t, "/v2/sandboxes")
	q := r.URL.Query()
	if q.Get("state") != "running,paused" || q.Get("limit") != "1" || q.Get("nextToken") != "p2" {
		t.Errorf("query %v", q)
	}
	// The metadata filter decodes as the server expects: once more, then per pair.
	pairs, err := url.QueryUnescape(q.Get("metadata"))
	if err != nil || pairs != "user%20id=a%26b%3Dc" {
		t.Errorf("metadata %q %v", pairs, err)
	}
	if _, err := p.NextItems(context.Background()); err == nil {
		t.Error("a page past the last one was fetched")
	}
}

func TestRetriesOn429WithRetryAfter(t *testing.T) {
	f := newFake(t)
	var calls atomic.Int32
	f.mux.HandleFunc("GET /sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("id") {
		case "slow":
			if calls.Add(1) < 3 {
				w.Header().Set("Retry-After", "0")
				apiError(w, 429, "slow down")
				return
			}
			writeJSON(w, 200, map[string]any{"sandboxID": "slow"})
		case "date":
			w.Header().Set("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT")
			apiError(w, 429, "slow down")
		case "far":
			w.Header().Set("Retry-After", "3600")
			apiError(w, 503, "busy")
		}
	})
	ctx := context.Background()
	c := f.client()
	if info, err := c.GetInfo(ctx, "slow"); err != nil || info.SandboxID != "slow" || calls.Load() != 3 {
		t.Errorf("after two 429s: %v %v, %d calls", info, err, calls.Load())
	}
	if _, err := c.GetInfo(ctx, "date"); !errors.As(err, new(*e2b.RateLimitError)) || f.count("/sandboxes/date") != 1 {
		t.Errorf("HTTP-date Retry-After: %v, %d calls", err, f.count("/sandboxes/date"))
	}
	start := time.Now()
	if _, err := f.client(e2b.WithRequestTimeout(time.Second)).GetInfo(ctx, "far"); !errors.As(err, new(*e2b.ServiceBusyError)) || time.Since(start) > 500*time.Millisecond {
		t.Errorf("Retry-After past the request timeout: %v after %v", err, time.Since(start))
	}
	calls.Store(0)
	if _, err := f.client(e2b.WithRetries(1)).GetInfo(ctx, "slow"); !errors.As(err, new(*e2b.RateLimitError)) || calls.Load() != 2 {
		t.Errorf("retries 1: %v, %d calls", err, calls.Load())
	}
}

func TestRetriesIdempotentCallsOnConnectionReset(t *testing.T) {
	f := newFake(t)
	var resets atomic.Int32
	reset := func(w http.ResponseWriter, r *http.Request) bool {
		if resets.Add(1) > 1 {
			return false
		}
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return true
	}
	f.mux.HandleFunc("GET /sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !reset(w, r) {
			writeJSON(w, 200, map[string]any{"sandboxID": "x"})
		}
	})
	f.mux.HandleFunc("POST /sandboxes/{id}/pause", func(w http.ResponseWriter, r *http.Request) {
		if !reset(w, r) {
			w.WriteHeader(204)
		}
	})
	ctx := context.Background()
	c := f.client(e2b.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}))
	if _, err := c.GetInfo(ctx, "x"); err != nil || resets.Load() != 2 {
		t.Errorf("GET after a reset: %v, %d attempts", err, resets.Load())
	}
	resets.Store(0)
	if _, err := c.Pause(ctx, "x", e2b.PauseOptions{}); err == nil || resets.Load() != 1 {
		t.Errorf("POST after a reset: %v, %d attempts", err, resets.Load())
	}
}

func TestRequestTimeout(t *testing.T) {
	f := newFake(t)
	f.mux.HandleFunc("GET /sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	_, err := f.client(e2b.WithRequestTimeout(50*time.Millisecond)).GetInfo(context.Background(), "x")
	if !errors.As(err, new(*e2b.TimeoutError)) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %T %v", err, err)
	}
}

func TestForkResults(t *testing.T) {
	f := newFake(t)
	f.handleJSON("POST /sandboxes/{id}/fork", 201, []map[string]any{
		{"sandbox": map[string]any{"sandboxID": "f1", "envdVersion": "0.6.13"}},
		{"error": map[string]any{"code": 429, "message": "too many"}},
	})
	res, err := f.client().Fork(context.Background(), "isbx1", e2b.ForkOptions{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Sandbox.ID != "f1" || !errors.As(res[1].Err, new(*e2b.RateLimitError)) {
		t.Errorf("fork = %+v", res)
	}
	if _, body := f.last(t, "/sandboxes/isbx1/fork"); body != `{"count":2}` {
		t.Errorf("fork body %s", body)
	}
}

func TestSignedURLs(t *testing.T) {
	f := newFake(t)
	sbx := f.sandbox(t)
	// The vector the official SDKs test their signatures with.
	u, err := sbx.DownloadURL("hello.txt", e2b.URLOptions{User: "user"})
	if err != nil {
		t.Fatal(err)
	}
	parsed, _ := url.Parse(u)
	q := parsed.Query()
	if q.Get("signature") != "v1_gUtH/s9YCJWgCizjfUxuWfhFE4QSydOWEIIvfLwDr6E" || q.Get("path") != "hello.txt" || q.Get("username") != "user" || parsed.Path != "/files" {
		t.Errorf("url %s", u)
	}
	sig, err := e2b.GetSignature("hello.txt", "read", "user", sbx.EnvdAccessToken(), 0)
	if err != nil || sig.Signature != q.Get("signature") || sig.Expiration != 0 {
		t.Errorf("GetSignature = %+v %v", sig, err)
	}
	if sig, err := e2b.GetSignature("f", "write", "", sbx.EnvdAccessToken(), time.Minute); err != nil || sig.Expiration < time.Now().Unix()+50 {
		t.Errorf("GetSignature with an expiry = %+v %v", sig, err)
	}
	for _, bad := range [][2]string{{"read", ""}, {"delete", "token"}} {
		if _, err := e2b.GetSignature("f", bad[0], "", bad[1], 0); !errors.As(err, new(*e2b.InvalidArgumentError)) {
			t.Errorf("GetSignature(%q, token %q): %v", bad[0], bad[1], err)
		}
	}
	u, _ = sbx.UploadURL("", e2b.URLOptions{Expires: time.Minute})
	parsed, _ = url.Parse(u)
	exp := parsed.Query().Get("signature_expiration")
	if exp == "" || parsed.Query().Has("path") || parsed.Query().Has("username") {
		t.Errorf("upload url %s", u)
	}
}
