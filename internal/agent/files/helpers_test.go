package files

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/user"
	"strconv"
	"testing"

	"github.com/warrenhq/warren/internal/agent/state"
	"github.com/warrenhq/warren/internal/warrentest"
)

type fixture struct {
	st  *state.State
	url string // base URL of /files
	dir string // a fresh directory the test may fill
}

// newFixture serves the handler with the current user as default user, so
// the tests work as root and as anyone else.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	cur, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	st := state.New()
	st.SetDefaultUser(cur.Username)
	mux := http.NewServeMux()
	mux.Handle("/files", New(st, slog.New(slog.NewTextHandler(io.Discard, nil))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	dir := warrentest.TempDir(t)
	return &fixture{st: st, url: srv.URL + "/files", dir: dir}
}

// fileURL is /files with the given query pairs.
func (f *fixture) fileURL(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return f.url + "?" + q.Encode()
}

type response struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, req *http.Request) response {
	t.Helper()
	// A transport of our own, so Go's client neither asks for nor undoes
	// gzip behind the test's back.
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{res.StatusCode, res.Header, string(body)}
}

func newRequest(t *testing.T, method, url string, body io.Reader, header ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

// wantError checks an error answer: status, envd's JSON body and headers.
func wantError(t *testing.T, r response, status int, msg string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d (%s), want %d", r.status, r.body, status)
	}
	var body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	if body.Code != status || (msg != "" && body.Message != msg) {
		t.Errorf("body = %+v, want code %d message %q", body, status, msg)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q, want nosniff", r.header.Get("X-Content-Type-Options"))
	}
}

func itoa(u uint32) string { return strconv.FormatUint(uint64(u), 10) }
