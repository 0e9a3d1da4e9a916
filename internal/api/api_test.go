package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/identity"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/secrets"
	"github.com/warrenhq/warren/internal/store/sqlite"
	"github.com/warrenhq/warren/internal/volume"
)

const (
	extraKey = "e2b_00112233445566778899aabbccddeeff00112233"
)

type testAPI struct {
	srv      *httptest.Server
	m        *lifecycle.Manager
	rt       *fake.Runtime
	key      string // a stored key of the default team
	otherKey string // a stored key of team "other"
	secrets  *secrets.Service
	iss      *identity.Issuer
}

func newAPI(t testing.TB) *testAPI {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rt := fake.New("warren/base", "python:3.12")
	evs := events.New(events.Config{Store: st, AllowPrivate: true})
	evs.Start(ctx)
	t.Cleanup(evs.Close)
	m, err := lifecycle.New(lifecycle.Deps{Runtime: rt, Agent: fake.NewAgent(), Store: st, Events: evs}, noPools())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	a := &testAPI{m: m, rt: rt, key: sandbox.NewAPIKey(), otherKey: sandbox.NewAPIKey()}
	st.PutTeam(ctx, sandbox.Team{ID: "other", Name: "other"})
	for i, k := range []struct{ key, team string }{{a.key, sandbox.DefaultTeamID}, {a.otherKey, "other"}} {
		err := st.CreateAPIKey(ctx, sandbox.APIKey{ID: string(rune('a' + i)), TeamID: k.team, Hash: sandbox.HashAPIKey(k.key)})
		if err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	vols, err := volume.New(context.Background(), volume.Config{Store: st, Dir: filepath.Join(dir, "volumes"), KeyFile: filepath.Join(dir, "volume.key")})
	if err != nil {
		t.Fatal(err)
	}
	// Volumes are mounts (nosuid binds): they go before the directory.
	t.Cleanup(func() {
		left, _ := st.ListAllVolumes(context.Background())
		for _, v := range left {
			vols.Delete(context.Background(), v.TeamID, v.ID)
		}
	})
	a.iss, err = identity.New(identity.Config{Issuer: "https://warren.test", KeyFile: filepath.Join(dir, "oidc-keys.json")})
	if err != nil {
		t.Fatal(err)
	}
	a.secrets, err = secrets.New(secrets.Config{Store: st, KeyFile: filepath.Join(dir, "secrets.key"), CreateKey: true, Sandboxes: st, Tokens: a.iss})
	if err != nil {
		t.Fatal(err)
	}
	a.srv = httptest.NewServer(New(Config{Manager: m, Keys: st, ExtraKeys: []string{extraKey}, Events: evs, Volumes: vols,
		Secrets: a.secrets, Identity: a.iss}))
	t.Cleanup(a.srv.Close)
	return a
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// noPools are the default settings without warm pools, so that the fake
// runtime holds only the tests' containers.
func noPools() lifecycle.Settings {
	s := lifecycle.DefaultSettings()
	s.WarmPool, s.WarmPoolCodeInterpreter = 0, 0
	return s
}

func (r response) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// do sends a request with the default key; body is JSON-encoded unless it
// is a string.
func (a *testAPI) do(t testing.TB, method, path string, body any) response {
	return a.doKey(t, a.key, method, path, body)
}

func (a *testAPI) doKey(t testing.TB, key, method, path string, body any) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, a.srv.URL+path, rd)
	if key != "" {
		req.Header.Set("X-API-KEY", key)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, b}
}

// wantError checks status and the {code, message} body.
func wantError(t *testing.T, what string, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status %d (%s), want %d", what, r.status, r.body, status)
		return
	}
	var e struct {
		Code    *int    `json:"code"`
		Message *string `json:"message"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Code == nil || *e.Code != status || e.Message == nil {
		t.Errorf("%s: body %s, want {code:%d, message}", what, r.body, status)
	}
}

// wantAnswer checks that r has status and, for an error, E2B's shape with
// a message containing message.
func wantAnswer(t *testing.T, what string, r response, status int, message string) {
	t.Helper()
	if status < 400 {
		if r.status != status {
			t.Errorf("%s: status %d %s, want %d", what, r.status, r.body, status)
		}
		return
	}
	wantError(t, what, r, status)
	if !strings.Contains(string(r.body), message) {
		t.Errorf("%s: message %s, want it to say %q", what, r.body, message)
	}
}

func (a *testAPI) create(t testing.TB, body map[string]any) map[string]any {
	t.Helper()
	r := a.do(t, "POST", "/v2/sandboxes", body)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var out map[string]any
	r.decode(t, &out)
	return out
}

func TestCreate(t *testing.T) {
	a := newAPI(t)
	for _, tc := range []struct {
		name, path string
		body       any
		wantToken  bool
		wantStatus int
	}{
		{"v2 always secure", "/v2/sandboxes", map[string]any{"templateID": "base"}, true, 201},
		{"v2 empty body defaults to base", "/v2/sandboxes", nil, true, 201},
		{"v1 secure", "/sandboxes", map[string]any{"templateID": "base", "secure": true, "timeout": 60}, true, 201},
		{"v1 not secure", "/sandboxes", map[string]any{"templateID": "base"}, false, 201},
		{"unknown fields ignored", "/v2/sandboxes", map[string]any{"templateID": "base", "mcp": nil, "volumeMounts": []any{}, "bogus": 1}, true, 201},
		{"v1 needs a template", "/sandboxes", map[string]any{}, false, 400},
		{"bad JSON", "/v2/sandboxes", `{"templateID":`, false, 400},
		{"wrong type", "/v2/sandboxes", `{"timeout":"soon"}`, false, 400},
		{"zero timeout", "/v2/sandboxes", map[string]any{"timeout": 0}, false, 400},
		{"negative timeout", "/v2/sandboxes", map[string]any{"timeout": -5}, false, 400},
		{"huge timeout", "/v2/sandboxes", map[string]any{"timeout": 1e15}, false, 400},
		{"unknown template", "/v2/sandboxes", map[string]any{"templateID": "nosuch"}, false, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.do(t, "POST", tc.path, tc.body)
			if tc.wantStatus != 201 {
				wantError(t, tc.name, r, tc.wantStatus)
				return
			}
			if r.status != 201 {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			var got map[string]any
			r.decode(t, &got)
			for _, k := range []string{"sandboxID", "templateID", "clientID", "envdVersion"} {
				if _, ok := got[k]; !ok {
					t.Errorf("response lacks %s: %s", k, r.body)
				}
			}
			if got["clientID"] != ClientID || got["envdVersion"] != "0.6.13" {
				t.Errorf("clientID/envdVersion = %v/%v", got["clientID"], got["envdVersion"])
			}
			if _, ok := got["envdAccessToken"]; ok != tc.wantToken {
				t.Errorf("envdAccessToken present = %v, want %v", ok, tc.wantToken)
			}
		})
	}

	got := a.create(t, map[string]any{"templateID": "base", "network": map[string]any{"allowPublicTraffic": false}})
	if tok, _ := got["trafficAccessToken"].(string); tok == "" {
		t.Errorf("no trafficAccessToken with allowPublicTraffic false: %v", got)
	}
}

func TestAuth(t *testing.T) {
	a := newAPI(t)
	for _, tc := range []struct{ name, key string }{
		{"missing", ""},
		{"bogus shape", "sk_nope"},
		{"unknown key", "e2b_" + strings.Repeat("ab", 20)},
	} {
		wantError(t, tc.name, a.doKey(t, tc.key, "GET", "/v2/sandboxes", nil), 401)
	}
	if r := a.doKey(t, extraKey, "GET", "/v2/sandboxes", nil); r.status != 200 {
		t.Errorf("WARREN_API_KEY: status %d", r.status)
	}
	if r := a.doKey(t, "", "GET", "/health", nil); r.status != 204 {
		t.Errorf("health without key: %d", r.status)
	}
	// A key sees only its team's sandboxes.
	id := a.create(t, map[string]any{"templateID": "base"})["sandboxID"].(string)
	wantError(t, "other team get", a.doKey(t, a.otherKey, "GET", "/sandboxes/"+id, nil), 404)
	wantError(t, "other team kill", a.doKey(t, a.otherKey, "DELETE", "/sandboxes/"+id, nil), 404)
	var list []map[string]any
	a.doKey(t, a.otherKey, "GET", "/v2/sandboxes", nil).decode(t, &list)
	if len(list) != 0 {
		t.Errorf("other team lists %v", list)
	}
	// The extra key belongs to the default team.
	if r := a.doKey(t, extraKey, "GET", "/sandboxes/"+id, nil); r.status != 200 {
		t.Errorf("extra key get: %d", r.status)
	}
}

func TestLifecycleEndpoints(t *testing.T) {
	a := newAPI(t)
	id := a.create(t, map[string]any{"templateID": "base", "timeout": 600, "metadata": map[string]string{"k": "v"},
		"autoPause": true, "autoResume": map[string]bool{"enabled": true}})["sandboxID"].(string)
	p := "/sandboxes/" + id

	r := a.do(t, "GET", p, nil)
	var detail map[string]any
	r.decode(t, &detail)
	if r.status != 200 || detail["state"] != "running" || detail["envdAccessToken"] == nil {
		t.Errorf("get: %d %s", r.status, r.body)
	}
	want := map[string]any{"autoResume": true, "onTimeout": "pause"}
	if diff := cmp.Diff(want, detail["lifecycle"]); diff != "" {
		t.Errorf("lifecycle (-want +got):\n%s", diff)
	}
	for _, k := range []string{"startedAt", "endAt"} {
		if _, err := time.Parse(time.RFC3339, detail[k].(string)); err != nil {
			t.Errorf("%s not RFC 3339: %v", k, detail[k])
		}
	}

	steps := []struct {
		name, method, path string
		body               any
		status             int
	}{
		{"timeout", "POST", p + "/timeout", map[string]any{"timeout": 120}, 204},
		{"timeout without value", "POST", p + "/timeout", map[string]any{}, 400},
		{"refresh", "POST", p + "/refreshes", map[string]any{"duration": 60}, 204},
		{"refresh too long", "POST", p + "/refreshes", map[string]any{"duration": 3601}, 400},
		{"network", "PUT", p + "/network", map[string]any{"denyOut": []string{"0.0.0.0/0"}}, 204},
		{"connect running", "POST", p + "/connect", map[string]any{"timeout": 60}, 200},
		{"connect v1 needs timeout", "POST", p + "/connect", map[string]any{}, 400},
		{"resume running", "POST", p + "/resume", map[string]any{"timeout": 60}, 409},
		{"pause", "POST", p + "/pause", nil, 204},
		{"pause paused", "POST", p + "/pause", map[string]any{"memory": true}, 409},
		{"timeout on paused", "POST", p + "/timeout", map[string]any{"timeout": 60}, 404},
		{"connect v2 resumes", "POST", "/v2" + p + "/connect", map[string]any{}, 201},
		{"connect v2 running", "POST", "/v2" + p + "/connect", nil, 200},
		{"connect v2 zero timeout", "POST", "/v2" + p + "/connect", map[string]any{"timeout": 0}, 400},
		{"pause without memory", "POST", p + "/pause", map[string]any{"memory": false}, 204},
		{"resume paused", "POST", p + "/resume", map[string]any{"timeout": 60}, 201},
		{"kill", "DELETE", p, nil, 204},
		{"kill again", "DELETE", p, nil, 404},
		{"get killed", "GET", p, nil, 404},
		{"connect killed", "POST", p + "/connect", map[string]any{"timeout": 60}, 404},
		{"kill unknown", "DELETE", "/sandboxes/nonexistingsandbox", nil, 404},
		{"kill invalid ID", "DELETE", "/sandboxes/Bad_ID", nil, 400},
		{"get invalid ID", "GET", "/sandboxes/" + url.PathEscape("a b"), nil, 400},
		{"pause bad JSON", "POST", "/sandboxes/nonexisting/pause", "{", 400},
	}
	for _, s := range steps {
		r := a.do(t, s.method, s.path, s.body)
		if s.status >= 400 {
			wantError(t, s.name, r, s.status)
		} else if r.status != s.status {
			t.Errorf("%s: status %d (%s), want %d", s.name, r.status, r.body, s.status)
		}
	}
	// A composite "<id>-<clientID>" names the same sandbox.
	id2 := a.create(t, nil)["sandboxID"].(string)
	if r := a.do(t, "GET", "/sandboxes/"+id2+"-"+ClientID, nil); r.status != 200 {
		t.Errorf("composite ID: %d", r.status)
	}
}

func TestList(t *testing.T) {
	a := newAPI(t)
	var ids []string
	for _, md := range []map[string]string{{"user": "a b&c=d", "env": "x"}, {"user": "a b&c=d"}, {"user": "z"}} {
		ids = append(ids, a.create(t, map[string]any{"templateID": "base", "metadata": md})["sandboxID"].(string))
		time.Sleep(2 * time.Millisecond)
	}
	a.do(t, "POST", "/sandboxes/"+ids[2]+"/pause", nil)

	listIDs := func(query string) ([]string, response) {
		t.Helper()
		r := a.do(t, "GET", "/v2/sandboxes"+query, nil)
		var list []struct {
			SandboxID string `json:"sandboxID"`
			State     string `json:"state"`
		}
		if r.status == 200 {
			r.decode(t, &list)
		}
		out := []string{}
		for _, s := range list {
			out = append(out, s.SandboxID)
		}
		return out, r
	}
	md := url.QueryEscape(url.PathEscape(url.Values{"user": {"a b&c=d"}}.Encode()))
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"default newest first", "", []string{ids[2], ids[1], ids[0]}},
		{"asc", "?order=asc", ids},
		{"running", "?state=running", []string{ids[1], ids[0]}},
		{"paused", "?state=paused", []string{ids[2]}},
		{"both", "?state=running,paused", []string{ids[2], ids[1], ids[0]}},
		{"metadata", "?metadata=" + md, []string{ids[1], ids[0]}},
		{"template", "?template=base", []string{ids[2], ids[1], ids[0]}},
		{"template none", "?template=python:3.12", []string{}},
		{"started after", "?startedAfter=2999-01-01T00:00:00Z", []string{}},
	} {
		got, r := listIDs(tc.query)
		if r.status != 200 {
			t.Errorf("%s: status %d %s", tc.name, r.status, r.body)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	for _, q := range []string{"?state=dead", "?order=up", "?limit=0", "?limit=101", "?nextToken=%21%21", "?metadata=novalue", "?startedAfter=yesterday"} {
		_, r := listIDs(q)
		wantError(t, "list"+q, r, 400)
	}

	// Paging: X-Next-Token until it is absent.
	var all []string
	q := "?limit=2"
	for range 5 {
		page, r := listIDs(q)
		all = append(all, page...)
		next := r.header.Get("X-Next-Token")
		if next == "" {
			break
		}
		q = "?limit=2&nextToken=" + url.QueryEscape(next)
	}
	if diff := cmp.Diff([]string{ids[2], ids[1], ids[0]}, all); diff != "" {
		t.Errorf("paging (-want +got):\n%s", diff)
	}

	// v1 list: running only.
	r := a.do(t, "GET", "/sandboxes", nil)
	var v1 []map[string]any
	r.decode(t, &v1)
	if len(v1) != 2 {
		t.Errorf("v1 list = %s, want the 2 running", r.body)
	}
}

func TestServerMetrics(t *testing.T) {
	a := newAPI(t)
	a.create(t, map[string]any{"templateID": "base"})
	paused := a.create(t, map[string]any{"templateID": "base"})
	if r := a.do(t, "POST", "/sandboxes/"+paused["sandboxID"].(string)+"/pause", nil); r.status != http.StatusNoContent {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	r := a.do(t, "GET", "/metrics", nil)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: %d %s %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	for _, want := range []string{
		"# TYPE warren_sandboxes gauge\n",
		`warren_sandboxes{state="running",mode=""} 1` + "\n",
		`warren_sandboxes{state="paused",mode="frozen"} 1` + "\n",
		`warren_sandboxes{state="paused",mode="checkpointed"} 0` + "\n",
		`warren_warm_pool_ready{template="base"} 0` + "\n",
		`warren_warm_pool_ready{template="code-interpreter-v1"} 0` + "\n",
		`warren_warm_pool_size{template="base"} 0` + "\n",
		"# TYPE warren_warm_pool_memory_budget_bytes gauge\n",
		"warren_checkpoints 0\n",
		"warren_checkpoint_bytes 0\n",
		// Both creates were cold (the pool is off): each of their steps counted twice.
		"# TYPE warren_create_phase_seconds histogram\n",
		`warren_create_phase_seconds_count{path="cold",phase="total"} 2` + "\n",
		`warren_create_phase_seconds_bucket{path="cold",phase="total",le="+Inf"} 2` + "\n",
		`warren_create_phase_seconds_count{path="cold",phase="engine"} 2` + "\n",
		`warren_create_phase_seconds_count{path="cold",phase="agent"} 2` + "\n",
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("metrics lack %q:\n%s", want, r.body)
		}
	}
	// Prometheus sends the key as a bearer token.
	req, _ := http.NewRequest("GET", a.srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+a.key)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("bearer: %v %v", res.StatusCode, err)
	}
	wantError(t, "metrics without a key", a.doKey(t, "", "GET", "/metrics", nil), http.StatusUnauthorized)
	wantError(t, "metrics with another team's key", a.doKey(t, a.otherKey, "GET", "/metrics", nil), http.StatusForbidden)
}
