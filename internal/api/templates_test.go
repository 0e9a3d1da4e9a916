package api

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
	"github.com/warrenhq/warren/internal/template"
)

// okEngine builds everything at once, printing one step line, and puts
// the image in the fake runtime.
type okEngine struct{ rt *fake.Runtime }

func (e okEngine) Build(ctx context.Context, r io.Reader, tag string, noCache bool, out func(string)) error {
	io.Copy(io.Discard, r)
	out("Step 1/1 : FROM warren/base")
	e.rt.Rebuild(tag)
	return nil
}
func (e okEngine) InspectImage(ctx context.Context, ref string) (sandbox.Image, error) {
	return e.rt.InspectImage(ctx, ref)
}
func (okEngine) ImageEnv(context.Context, string) ([]string, error) { return nil, nil }
func (okEngine) RemoveImage(context.Context, string) error          { return nil }
func (okEngine) RemoveLayer(context.Context, string) error          { return nil }

// commands records start commands; ready commands succeed unless they
// contain "fail".
type commands struct {
	mu      sync.Mutex // guards started
	started []string
}

func (c *commands) StartCommand(ctx context.Context, addr, token, user, workdir, cmd string, env map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started = append(c.started, user+"@"+workdir+": "+cmd)
	return nil
}

func (c *commands) RunCommand(ctx context.Context, addr, token, user, workdir, cmd string, env map[string]string) (int, string, error) {
	if strings.Contains(cmd, "fail") {
		return 1, "not yet", nil
	}
	return 0, "", nil
}

func newTemplateAPI(t *testing.T) (*testAPI, *commands) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rt := fake.New("warren/base")
	reg, err := template.New(template.Config{Store: st, Engine: okEngine{rt}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	reg.Start(ctx)
	t.Cleanup(func() { reg.Close() })
	cmds := &commands{}
	set := noPools()
	set.ReadyTimeout = 300 * time.Millisecond
	m, err := lifecycle.New(lifecycle.Deps{Runtime: rt, Agent: fake.NewAgent(), Store: st, Templates: reg, Commands: cmds}, set)
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
		if err := st.CreateAPIKey(ctx, sandbox.APIKey{ID: string(rune('a' + i)), TeamID: k.team, Hash: sandbox.HashAPIKey(k.key)}); err != nil {
			t.Fatal(err)
		}
	}
	a.srv = httptest.NewServer(New(Config{Manager: m, Keys: st, Templates: reg}))
	t.Cleanup(a.srv.Close)
	return a, cmds
}

func tarGz(t *testing.T) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "f.txt", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	tw.Write([]byte("f"))
	tw.Close()
	return buf.Bytes()
}

// build requests, uploads and starts a build, and waits for it.
func (a *testAPI) build(t *testing.T, name string, spec map[string]any) (tplID, buildID string) {
	t.Helper()
	r := a.do(t, "POST", "/v3/templates", map[string]any{"name": name, "cpuCount": 1, "memoryMB": 256})
	if r.status != http.StatusAccepted {
		t.Fatalf("POST /v3/templates: %d %s", r.status, r.body)
	}
	var req struct {
		TemplateID, BuildID string
		Names, Tags         []string
	}
	r.decode(t, &req)
	if r := a.do(t, "POST", "/v2/templates/"+req.TemplateID+"/builds/"+req.BuildID, spec); r.status != http.StatusAccepted {
		t.Fatalf("start build: %d %s", r.status, r.body)
	}
	for i := 0; i < 200; i++ {
		var st struct{ Status string }
		a.do(t, "GET", "/templates/"+req.TemplateID+"/builds/"+req.BuildID+"/status", nil).decode(t, &st)
		if st.Status == "ready" || st.Status == "error" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return req.TemplateID, req.BuildID
}

func TestTemplateEndpoints(t *testing.T) {
	a, cmds := newTemplateAPI(t)
	body := tarGz(t)
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])

	r := a.do(t, "POST", "/v3/templates", map[string]any{"name": "web:v1", "tags": []string{"extra"}})
	if r.status != http.StatusAccepted {
		t.Fatalf("POST /v3/templates: %d %s", r.status, r.body)
	}
	var req struct {
		TemplateID, BuildID  string
		Names, Tags, Aliases []string
		Public               bool
	}
	r.decode(t, &req)
	if req.Names[0] != "web" || strings.Join(req.Tags, ",") != "v1,extra" {
		t.Errorf("v3 response %+v", req)
	}

	// Upload: 201 with a URL on this server, then present.
	var up struct {
		Present bool
		URL     string
	}
	r = a.do(t, "GET", "/templates/"+req.TemplateID+"/files/"+hash, nil)
	r.decode(t, &up)
	if r.status != http.StatusCreated || up.Present || !strings.HasPrefix(up.URL, a.srv.URL+UploadPath) {
		t.Fatalf("files: %d %+v", r.status, up)
	}
	put := func(data []byte, length int64) int {
		rq, _ := http.NewRequest("PUT", up.URL, bytes.NewReader(data))
		rq.ContentLength = length
		res, err := http.DefaultClient.Do(rq)
		if err != nil {
			return -1
		}
		res.Body.Close()
		return res.StatusCode
	}
	if s := put(body[:10], 10); s != http.StatusBadRequest {
		t.Errorf("PUT of a truncated archive: %d, want 400", s)
	}
	if s := put(body, int64(len(body))); s != http.StatusOK {
		t.Errorf("PUT: %d", s)
	}
	a.do(t, "GET", "/templates/"+req.TemplateID+"/files/"+hash, nil).decode(t, &up)
	if !up.Present {
		t.Errorf("files after upload: not present")
	}
	// Present files still get a URL, as on E2B: the SDK's forceUpload
	// uploads them again.
	if !strings.HasPrefix(up.URL, a.srv.URL+UploadPath) {
		t.Errorf("present files: no upload URL: %+v", up)
	} else if s := put(body, int64(len(body))); s != http.StatusOK {
		t.Errorf("PUT again: %d", s)
	}
	wantError(t, "bad hash", a.do(t, "GET", "/templates/"+req.TemplateID+"/files/xyz", nil), http.StatusBadRequest)

	spec := map[string]any{"fromImage": "warren/base", "startCmd": "serve", "readyCmd": "true", "steps": []map[string]any{
		{"type": "COPY", "args": []string{"f.txt", "/f.txt", "", "0600"}, "filesHash": hash, "forceUpload": nil},
		{"type": "WORKDIR", "args": []string{"/srv"}},
	}}
	if r := a.do(t, "POST", "/v2/templates/"+req.TemplateID+"/builds/"+req.BuildID, spec); r.status != http.StatusAccepted {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	wantError(t, "start again", a.do(t, "POST", "/v2/templates/"+req.TemplateID+"/builds/"+req.BuildID, spec), http.StatusConflict)
	var st struct {
		TemplateID, BuildID, Status string
		LogEntries                  []map[string]any
		Logs                        []string
	}
	for i := 0; i < 200 && st.Status != "ready"; i++ {
		a.do(t, "GET", "/templates/"+req.TemplateID+"/builds/"+req.BuildID+"/status?logsOffset=0&limit=100", nil).decode(t, &st)
		time.Sleep(10 * time.Millisecond)
	}
	if st.Status != "ready" || len(st.LogEntries) == 0 || st.Logs == nil || st.LogEntries[0]["timestamp"] == nil {
		t.Fatalf("status %+v", st)
	}
	var logs struct{ Logs []map[string]any }
	a.do(t, "GET", "/templates/"+req.TemplateID+"/builds/"+req.BuildID+"/logs?direction=backward&limit=1", nil).decode(t, &logs)
	if len(logs.Logs) != 1 {
		t.Errorf("logs: %+v", logs)
	}
	wantError(t, "bad level", a.do(t, "GET", "/templates/"+req.TemplateID+"/builds/"+req.BuildID+"/status?level=loud", nil), http.StatusBadRequest)

	// Aliases: 200 for ours, 403 for another team's, 404 for none.
	if r := a.do(t, "GET", "/templates/aliases/web", nil); r.status != http.StatusOK {
		t.Errorf("alias: %d", r.status)
	}
	if r := a.doKey(t, a.otherKey, "GET", "/templates/aliases/web", nil); r.status != http.StatusForbidden {
		t.Errorf("alias of another team: %d, want 403", r.status)
	}
	wantError(t, "no alias", a.do(t, "GET", "/templates/aliases/nope", nil), http.StatusNotFound)

	// Tags.
	r = a.do(t, "POST", "/templates/tags", map[string]any{"target": "web:v1", "tags": []string{"prod"}})
	if r.status != http.StatusCreated || !strings.Contains(string(r.body), req.BuildID) {
		t.Errorf("assign tags: %d %s", r.status, r.body)
	}
	var tags []struct{ Tag, BuildID string }
	a.do(t, "GET", "/templates/web/tags", nil).decode(t, &tags)
	if len(tags) != 3 {
		t.Errorf("tags: %+v", tags)
	}
	if r := a.do(t, "DELETE", "/templates/tags", map[string]any{"name": "web", "tags": []string{"prod"}}); r.status != http.StatusNoContent {
		t.Errorf("remove tags: %d %s", r.status, r.body)
	}
	wantError(t, "remove a missing tag", a.do(t, "DELETE", "/templates/tags", map[string]any{"name": "web", "tags": []string{"prod"}}), http.StatusNotFound)

	// Listing and details.
	var list []map[string]any
	a.do(t, "GET", "/templates", nil).decode(t, &list)
	if len(list) != 1 || list[0]["buildStatus"] != "ready" || list[0]["templateID"] != req.TemplateID {
		t.Errorf("GET /templates: %+v", list)
	}
	a.do(t, "GET", "/v2/templates", nil).decode(t, &list)
	if len(list) != 1 {
		t.Errorf("GET /v2/templates: %+v", list)
	}
	var detail struct{ Builds []map[string]any }
	a.do(t, "GET", "/templates/"+req.TemplateID, nil).decode(t, &detail)
	if len(detail.Builds) != 1 || detail.Builds[0]["status"] != "ready" {
		t.Errorf("GET /templates/{id}: %+v", detail)
	}
	wantError(t, "another team's template", a.doKey(t, a.otherKey, "GET", "/templates/"+req.TemplateID, nil), http.StatusNotFound)
	var names struct{ Names []string }
	if r := a.do(t, "PATCH", "/v2/templates/"+req.TemplateID, map[string]any{"public": true}); r.status != http.StatusOK {
		t.Errorf("PATCH: %d", r.status)
	} else if r.decode(t, &names); len(names.Names) != 1 {
		t.Errorf("PATCH names: %+v", names)
	}

	// A sandbox of the template: its tag resolves, the start command
	// runs as the template's user in its workdir.
	sb := a.create(t, map[string]any{"templateID": "web:v1"})
	if sb["templateID"] != req.TemplateID {
		t.Errorf("sandbox template %v", sb["templateID"])
	}
	if got := strings.Join(cmds.started, "|"); got != "user@/srv: serve" {
		t.Errorf("start commands: %q", got)
	}

	// Delete: 204, then 404; snapshots keep their own path.
	if r := a.do(t, "DELETE", "/templates/"+req.TemplateID, nil); r.status != http.StatusNoContent {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	wantError(t, "delete again", a.do(t, "DELETE", "/templates/"+req.TemplateID, nil), http.StatusNotFound)
}

func TestTemplateBadInput(t *testing.T) {
	a, _ := newTemplateAPI(t)
	wantError(t, "bad name", a.do(t, "POST", "/v3/templates", map[string]any{"name": "Bad Name"}), http.StatusBadRequest)
	wantError(t, "tiny memory", a.do(t, "POST", "/v3/templates", map[string]any{"name": "x", "memoryMB": 64}), http.StatusBadRequest)
	wantError(t, "no cpu", a.do(t, "POST", "/v3/templates", map[string]any{"name": "x", "cpuCount": 0}), http.StatusBadRequest)
	tplID, buildID := a.build(t, "ok", map[string]any{"fromImage": "warren/base"})
	_ = tplID
	r := a.do(t, "POST", "/v3/templates", map[string]any{"name": "steps"})
	var req struct{ TemplateID, BuildID string }
	r.decode(t, &req)
	for what, steps := range map[string][]map[string]any{
		"unknown step": {{"type": "NOPE"}},
		"missing hash": {{"type": "COPY", "args": []string{"a", "b"}}},
		"not uploaded": {{"type": "COPY", "args": []string{"a", "b"}, "filesHash": strings.Repeat("0", 64)}},
	} {
		wantError(t, what, a.do(t, "POST", "/v2/templates/"+req.TemplateID+"/builds/"+req.BuildID,
			map[string]any{"fromImage": "warren/base", "steps": steps}), http.StatusBadRequest)
	}
	wantError(t, "unknown build", a.do(t, "GET", "/templates/"+req.TemplateID+"/builds/"+buildID+"/status", nil), http.StatusNotFound)
	wantError(t, "unknown upload", func() response {
		rq, _ := http.NewRequest("PUT", a.srv.URL+UploadPath+"nope", strings.NewReader("x"))
		res, err := http.DefaultClient.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return response{status: res.StatusCode, header: res.Header, body: b}
	}(), http.StatusNotFound)
}

func TestTemplateReadyCommandFails(t *testing.T) {
	a, _ := newTemplateAPI(t)
	a.build(t, "never-ready", map[string]any{"fromImage": "warren/base", "startCmd": "serve", "readyCmd": "fail"})
	r := a.do(t, "POST", "/v2/sandboxes", map[string]any{"templateID": "never-ready"})
	if r.status != http.StatusInternalServerError || !strings.Contains(string(r.body), "ready command") {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if cs, _ := a.rt.List(context.Background()); len(cs) != 0 {
		t.Errorf("the failed sandbox's container is left: %+v", cs)
	}
}
