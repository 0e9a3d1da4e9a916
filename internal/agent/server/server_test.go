package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/warrenhq/warren/internal/agent/state"
	"github.com/warrenhq/warren/internal/envdauth"
	"github.com/warrenhq/warren/proto/filesystem/filesystemconnect"
	"github.com/warrenhq/warren/proto/process/processconnect"
)

// harness is an agent server with stub services on an httptest server.
type harness struct {
	t   *testing.T
	st  *state.State
	srv *Server
	url string
}

func newHarness(t *testing.T, secret string) *harness {
	t.Helper()
	st := state.New()
	// The stub /files says who it is, so tests can tell it was reached.
	files := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})
	srv := New(Config{
		State:        st,
		Log:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		Process:      processconnect.UnimplementedProcessHandler{},
		Filesystem:   filesystemconnect.UnimplementedFilesystemHandler{},
		Files:        files,
		ServerSecret: secret,
		TrustRoot:    t.TempDir(),
	})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	return &harness{t: t, st: st, srv: srv, url: ts.URL}
}

// do sends a request and returns the response with its body read.
func (h *harness) do(method, path, body string, header map[string]string) (*http.Response, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp, string(data)
}

const unauthorizedBody = `{"code":401,"message":"unauthorized access, please provide a valid access token or method signing if supported"}` + "\n"

func TestHealth(t *testing.T) {
	h := newHarness(t, "")
	h.st.SetAccessToken("tok") // health stays open with a token set
	resp, body := h.do("GET", "/health", "", nil)
	got := []string{strconv.Itoa(resp.StatusCode), resp.Header.Get("Cache-Control"), body}
	if diff := cmp.Diff([]string{"204", "no-store", ""}, got); diff != "" {
		t.Errorf("GET /health (-want +got):\n%s", diff)
	}
}

func TestEnvs(t *testing.T) {
	h := newHarness(t, "")
	h.st.SetEnvVars(map[string]string{"A": "1", "B": "two"})
	resp, body := h.do("GET", "/envs", "", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("GET /envs = %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"A": "1", "B": "two"}, got); diff != "" {
		t.Errorf("GET /envs (-want +got):\n%s", diff)
	}
}

func TestMetrics(t *testing.T) {
	h := newHarness(t, "")
	resp, body := h.do("GET", "/metrics", "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, body)
	}
	var got map[string]float64
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	want := []string{"cpu_count", "cpu_used_pct", "disk_total", "disk_used", "mem_cache", "mem_total", "mem_total_mib", "mem_used", "mem_used_mib", "ts"}
	if diff := cmp.Diff(want, keys, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	checks := []struct {
		name string
		ok   bool
	}{
		{"ts is now", time.Since(time.Unix(int64(got["ts"]), 0)).Abs() < time.Minute},
		{"cpu_count ≥ 1", got["cpu_count"] >= 1},
		{"cpu_used_pct in [0,100]", got["cpu_used_pct"] >= 0 && got["cpu_used_pct"] <= 100},
		{"mem_total > 0", got["mem_total"] > 0},
		{"mem_used ≤ mem_total", got["mem_used"] <= got["mem_total"]},
		{"mem_total_mib", got["mem_total_mib"] == float64(uint64(got["mem_total"])>>20)},
		{"disk_total > 0", got["disk_total"] > 0},
		{"disk_used ≤ disk_total", got["disk_used"] <= got["disk_total"]},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: got %s", c.name, body)
		}
	}
}

func TestAccessToken(t *testing.T) {
	h := newHarness(t, "") // tunnel disabled: its 403 shows the token check let it through
	h.st.SetAccessToken("secret-token")
	good := map[string]string{"X-Access-Token": "secret-token"}
	bad := map[string]string{"X-Access-Token": "secret-tokem"}
	connect := map[string]string{"Content-Type": "application/json", "X-Access-Token": "secret-token"}
	tests := []struct {
		name       string
		method     string
		path       string
		header     map[string]string
		wantStatus int
	}{
		{"envs without token", "GET", "/envs", nil, 401},
		{"envs with wrong token", "GET", "/envs", bad, 401},
		{"envs with token", "GET", "/envs", good, 200},
		{"metrics without token", "GET", "/metrics", nil, 401},
		{"rpc without token", "POST", "/process.Process/List", map[string]string{"Content-Type": "application/json"}, 401},
		{"rpc with token", "POST", "/process.Process/List", connect, 501},
		{"fs rpc without token", "POST", "/filesystem.Filesystem/Stat", map[string]string{"Content-Type": "application/json"}, 401},
		{"health exempt", "GET", "/health", nil, 204},
		{"files GET exempt", "GET", "/files", nil, 418},
		{"files POST exempt", "POST", "/files", nil, 418},
		{"init exempt", "POST", "/init", map[string]string{"X-Access-Token": "secret-token"}, 204},
		{"tunnel exempt", "GET", "/_warren/tunnel?port=1", nil, 403},
		{"unknown path", "GET", "/nope", nil, 401},
		{"health spelled otherwise", "GET", "/health/", nil, 401},
		{"OPTIONS that is no preflight", "OPTIONS", "/process.Process/List", nil, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := ""
			if strings.Contains(tt.path, ".") {
				body = "{}"
			}
			resp, got := h.do(tt.method, tt.path, body, tt.header)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d (body %s)", resp.StatusCode, tt.wantStatus, got)
			}
			// The proxy judges requests for a paused sandbox by
			// envdauth.Check: it must refuse what the agent refuses.
			// (The stub /files checks nothing; /init and the tunnel are
			// the agent's own.)
			if p := strings.SplitN(tt.path, "?", 2)[0]; p != "/files" && p != "/init" && p != tunnelPath {
				req := httptest.NewRequest(tt.method, tt.path, nil)
				for k, v := range tt.header {
					req.Header.Set(k, v)
				}
				if refused := envdauth.Check(req, "secret-token", time.Now()) != nil; refused != (tt.wantStatus == 401) {
					t.Errorf("envdauth.Check refused = %v, the agent answered %d", refused, tt.wantStatus)
				}
			}
			if tt.wantStatus != 401 {
				return
			}
			gotHead := []string{got, resp.Header.Get("Content-Type"), resp.Header.Get("X-Content-Type-Options")}
			wantHead := []string{unauthorizedBody, "application/json; charset=utf-8", "nosniff"}
			if diff := cmp.Diff(wantHead, gotHead); diff != "" {
				t.Errorf("401 response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoTokenMeansOpen(t *testing.T) {
	h := newHarness(t, "")
	if resp, body := h.do("GET", "/envs", "", nil); resp.StatusCode != 200 {
		t.Errorf("GET /envs without a token set = %d %s", resp.StatusCode, body)
	}
}

func TestCORS(t *testing.T) {
	h := newHarness(t, "")
	h.st.SetAccessToken("tok") // preflights carry no token and must pass anyway

	resp, _ := h.do("OPTIONS", "/process.Process/Start", "", map[string]string{
		"Origin":                         "https://app.example",
		"Access-Control-Request-Method":  "POST",
		"Access-Control-Request-Headers": "content-type,x-access-token,connect-protocol-version",
	})
	got := map[string]string{"status": strconv.Itoa(resp.StatusCode)}
	for _, k := range []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers", "Access-Control-Max-Age"} {
		got[k] = resp.Header.Get(k)
	}
	want := map[string]string{
		"status":                       "204",
		"Access-Control-Allow-Origin":  "*",
		"Access-Control-Allow-Methods": "HEAD, GET, POST, PUT, PATCH, DELETE",
		"Access-Control-Allow-Headers": "content-type,x-access-token,connect-protocol-version",
		"Access-Control-Max-Age":       "7200",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("preflight (-want +got):\n%s", diff)
	}

	resp, _ = h.do("GET", "/health", "", map[string]string{"Origin": "https://app.example"})
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Grpc-Status") {
		t.Errorf("simple request CORS headers = %v", resp.Header)
	}
}

// TestServe runs the real http.Server: HTTP/1.1 and h2c on one port.
func TestServe(t *testing.T) {
	srv := New(Config{
		State:      state.New(),
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Process:    processconnect.UnimplementedProcessHandler{},
		Filesystem: filesystemconnect.UnimplementedFilesystemHandler{},
		Files:      http.NotFoundHandler(),
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()

	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	for name, client := range map[string]*http.Client{
		"HTTP/1.1": {Transport: &http.Transport{}},
		"HTTP/2.0": {Transport: &http.Transport{Protocols: &h2}},
	} {
		resp, err := client.Get("http://" + ln.Addr().String() + "/health")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 204 || resp.Proto != name {
			t.Errorf("%s: got %d over %s", name, resp.StatusCode, resp.Proto)
		}
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve returned %v after Close", err)
	}
}

// OnRequest sees every request as it starts, refused ones too: the agent's
// idle trim must never take a busy agent for an idle one.
func TestOnRequest(t *testing.T) {
	var n atomic.Int32
	srv := New(Config{
		State:      state.New(),
		Log:        slog.New(slog.DiscardHandler),
		Process:    processconnect.UnimplementedProcessHandler{},
		Filesystem: filesystemconnect.UnimplementedFilesystemHandler{},
		Files:      http.NotFoundHandler(),
		TrustRoot:  t.TempDir(),
		OnRequest:  func() { n.Add(1) },
	})
	defer srv.Close()
	for _, path := range []string{"/health", "/envs", "/nowhere"} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	}
	if got := n.Load(); got != 3 {
		t.Errorf("OnRequest called %d times for 3 requests", got)
	}
}
