package server

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/agent/trust"
	"github.com/warrenhq/warren/internal/tlsca"
)

// settings is what /init configures, as the tests observe it.
type settings struct {
	Env     map[string]string
	Token   string
	User    string
	Workdir string
}

func (h *harness) settings() settings {
	return settings{h.st.EnvVars(), h.st.AccessToken(), h.st.DefaultUser(), h.st.DefaultWorkdir()}
}

func TestInitSequence(t *testing.T) {
	h := newHarness(t, "")
	steps := []struct {
		name   string
		body   string
		header map[string]string
		status int
		want   settings
	}{
		{
			name:   "empty body on a fresh agent",
			status: 204,
			want:   settings{Env: map[string]string{}, User: "root"},
		},
		{
			name:   "first init sets everything",
			body:   `{"envVars":{"A":"1","B":"2"},"accessToken":"tok1","timestamp":"2030-01-01T00:00:00Z","defaultUser":"user","defaultWorkdir":"/home/user","volumeMounts":[],"hyperloopIP":"x"}`,
			status: 204,
			want:   settings{Env: map[string]string{"A": "1", "B": "2"}, Token: "tok1", User: "user", Workdir: "/home/user"},
		},
		{
			name:   "no token once one is set",
			body:   `{"envVars":{"C":"3"}}`,
			status: 401,
			want:   settings{Env: map[string]string{"A": "1", "B": "2"}, Token: "tok1", User: "user", Workdir: "/home/user"},
		},
		{
			name:   "different body token",
			body:   `{"accessToken":"tok2","envVars":{"C":"3"}}`,
			status: 401,
			want:   settings{Env: map[string]string{"A": "1", "B": "2"}, Token: "tok1", User: "user", Workdir: "/home/user"},
		},
		{
			name:   "different body token even with the right header",
			body:   `{"accessToken":"tok2"}`,
			header: map[string]string{"X-Access-Token": "tok1"},
			status: 401,
			want:   settings{Env: map[string]string{"A": "1", "B": "2"}, Token: "tok1", User: "user", Workdir: "/home/user"},
		},
		{
			name:   "wrong header token",
			body:   `{}`,
			header: map[string]string{"X-Access-Token": "tok2"},
			status: 401,
			want:   settings{Env: map[string]string{"A": "1", "B": "2"}, Token: "tok1", User: "user", Workdir: "/home/user"},
		},
		{
			name:   "token in the header replaces env vars",
			body:   `{"envVars":{"C":"3"},"timestamp":"2030-01-01T00:00:01Z"}`,
			header: map[string]string{"X-Access-Token": "tok1"},
			status: 204,
			want:   settings{Env: map[string]string{"C": "3"}, Token: "tok1", User: "user", Workdir: "/home/user"},
		},
		{
			name:   "same token in the body",
			body:   `{"accessToken":"tok1","defaultUser":"root"}`,
			status: 204,
			want:   settings{Env: map[string]string{"C": "3"}, Token: "tok1", User: "root", Workdir: "/home/user"},
		},
		{
			name:   "stale timestamp is ignored",
			body:   `{"accessToken":"tok1","envVars":{"OLD":"1"},"timestamp":"2030-01-01T00:00:00Z"}`,
			status: 204,
			want:   settings{Env: map[string]string{"C": "3"}, Token: "tok1", User: "root", Workdir: "/home/user"},
		},
		{
			name:   "malformed JSON",
			body:   `{"envVars":`,
			header: map[string]string{"X-Access-Token": "tok1"},
			status: 400,
			want:   settings{Env: map[string]string{"C": "3"}, Token: "tok1", User: "root", Workdir: "/home/user"},
		},
		{
			name:   "bad timestamp",
			body:   `{"timestamp":"yesterday"}`,
			header: map[string]string{"X-Access-Token": "tok1"},
			status: 400,
			want:   settings{Env: map[string]string{"C": "3"}, Token: "tok1", User: "root", Workdir: "/home/user"},
		},
		{
			name:   "bad env var name",
			body:   `{"envVars":{"A=B":"1"}}`,
			header: map[string]string{"X-Access-Token": "tok1"},
			status: 400,
			want:   settings{Env: map[string]string{"C": "3"}, Token: "tok1", User: "root", Workdir: "/home/user"},
		},
		{
			name:   "wrong type",
			body:   `{"envVars":["A"]}`,
			header: map[string]string{"X-Access-Token": "tok1"},
			status: 400,
			want:   settings{Env: map[string]string{"C": "3"}, Token: "tok1", User: "root", Workdir: "/home/user"},
		},
	}
	for _, s := range steps {
		resp, body := h.do("POST", "/init", s.body, s.header)
		if resp.StatusCode != s.status {
			t.Fatalf("%s: status %d, want %d (%s)", s.name, resp.StatusCode, s.status, body)
		}
		if s.status == 204 {
			got := []string{resp.Header.Get("X-Envd-Version"), resp.Header.Get("Cache-Control"), body}
			if diff := cmp.Diff([]string{"0.6.13", "no-store", ""}, got); diff != "" {
				t.Errorf("%s: response (-want +got):\n%s", s.name, diff)
			}
		} else {
			var e errorBody
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Code != s.status || e.Message == "" {
				t.Errorf("%s: error body %q", s.name, body)
			}
		}
		if diff := cmp.Diff(s.want, h.settings()); diff != "" {
			t.Errorf("%s: settings (-want +got):\n%s", s.name, diff)
		}
	}
}

// An agent started with a server secret takes /init only with it: a local
// process that reaches its published port past the proxy's filter cannot
// configure a fresh agent (a warm pool's) nor one without an access token.
func TestInitNeedsServerSecret(t *testing.T) {
	h := newHarness(t, "s3cret")
	fresh := settings{Env: map[string]string{}, User: "root"}
	body := `{"accessToken":"tok1","defaultUser":"user"}`
	for _, tc := range []struct {
		name   string
		header map[string]string
		status int
		want   settings
	}{
		{"no secret", nil, 401, fresh},
		{"wrong secret", map[string]string{"X-Warren-Agent-Secret": "s3cres"}, 401, fresh},
		{"secret", map[string]string{"X-Warren-Agent-Secret": "s3cret"}, 204, settings{Env: map[string]string{}, Token: "tok1", User: "user"}},
	} {
		resp, got := h.do("POST", "/init", body, tc.header)
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: status %d, want %d (%s)", tc.name, resp.StatusCode, tc.status, got)
		}
		if tc.status == 401 && got != `{"code":401,"message":"invalid agent secret"}`+"\n" {
			t.Errorf("%s: body %q", tc.name, got)
		}
		if diff := cmp.Diff(tc.want, h.settings()); diff != "" {
			t.Errorf("%s: settings (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestInitConcurrent holds one /init open by not finishing its body; a
// second one meanwhile must get 503, and one after it 204.
func TestInitConcurrent(t *testing.T) {
	h := newHarness(t, "")
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", h.url+"/init", pr)
	if err != nil {
		t.Fatal(err)
	}
	// With Expect: 100-continue the client sends the body only once the
	// handler starts reading it, that is, once it holds the lock.
	req.Header.Set("Expect", "100-continue")
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Minute}}
	first := make(chan int, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	if _, err := pw.Write([]byte(`{"envVars":{"A":"1"}`)); err != nil {
		t.Fatal(err)
	}
	// The write returned: the handler is reading the body.
	resp, body := h.do("POST", "/init", `{}`, nil)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("concurrent init = %d %s, want 503", resp.StatusCode, body)
	}
	pw.Write([]byte(`}`))
	pw.Close()
	if got := <-first; got != 204 {
		t.Errorf("first init = %d, want 204", got)
	}
	if resp, _ := h.do("POST", "/init", `{}`, nil); resp.StatusCode != 204 {
		t.Errorf("init after the first = %d, want 204", resp.StatusCode)
	}
}

func TestParseInit(t *testing.T) {
	ts := time.Date(2025, 3, 4, 5, 6, 7, 8, time.FixedZone("", 3600))
	got, err := parseInit([]byte(`{"envVars":{"K":"v=w"},"accessToken":"","timestamp":"2025-03-04T05:06:07.000000008+01:00","defaultUser":"u","hyperloopIP":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	empty, user := "", "u"
	want := initRequest{EnvVars: map[string]string{"K": "v=w"}, AccessToken: &empty, Timestamp: &ts, DefaultUser: &user}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseInit (-want +got):\n%s", diff)
	}
	for _, bad := range []string{`[]`, `{} {}`, `{"envVars":{"":"x"}}`, `{"envVars":{"A":"\u0000"}}`, `{"defaultWorkdir":"/a\u0000"}`, `{"caBundle":"x"}`, `{"caBundle":"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}`} {
		if _, err := parseInit([]byte(bad)); err == nil {
			t.Errorf("parseInit(%s) succeeded", bad)
		}
	}
}

func FuzzParseInit(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseInit(body)
		if err != nil {
			return
		}
		// What was accepted survives a round trip unchanged, so nothing
		// the parser let through depends on quirks of the input.
		data, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", req, err)
		}
		again, err := parseInit(data)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", data, err)
		}
		if diff := cmp.Diff(req, again); diff != "" {
			t.Errorf("round trip (-first +second):\n%s", diff)
		}
	})
}

// TestInitCABundle: the bundle goes into the trust store under the
// agent's root, and processes get the variables pointing at it.
func TestInitCABundle(t *testing.T) {
	h := newHarness(t, "")
	ca, err := tlsca.LoadAuthority(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"caBundle": string(ca.CertPEM())})
	if resp, msg := h.do("POST", "/init", string(body), nil); resp.StatusCode != 204 {
		t.Fatalf("init with a CA bundle = %d %s", resp.StatusCode, msg)
	}
	if env := h.st.TrustEnv(); env["NODE_EXTRA_CA_CERTS"] != "/"+trust.AnchorFile || env["SSL_CERT_FILE"] == "" {
		t.Errorf("trust env = %v", env)
	}
	if got, err := os.ReadFile(filepath.Join(h.srv.cfg.TrustRoot, trust.AnchorFile)); err != nil || string(got) != string(ca.CertPEM()) {
		t.Errorf("anchor file: %q, %v", got, err)
	}
}

// An agent restored from another sandbox's memory (a fork) holds that
// sandbox's server secret and token: the server, proving both, gives it
// its own, and from then on only the new ones open /init and the tunnel.
func TestInitGivesAForkItsOwnSecrets(t *testing.T) {
	h := newHarness(t, "old-secret")
	if resp, body := h.do("POST", "/init", `{"accessToken":"old-tok"}`, map[string]string{"X-Warren-Agent-Secret": "old-secret"}); resp.StatusCode != 204 {
		t.Fatalf("first init = %d %s", resp.StatusCode, body)
	}
	for _, tc := range []struct {
		name   string
		body   string
		header map[string]string
		status int
		token  string
	}{
		{"new token without proving the old one", `{"accessToken":"new-tok"}`,
			map[string]string{"X-Warren-Agent-Secret": "old-secret"}, 401, "old-tok"},
		{"empty agent secret", `{"agentSecret":""}`,
			map[string]string{"X-Warren-Agent-Secret": "old-secret", "X-Access-Token": "old-tok"}, 400, "old-tok"},
		{"new secret and token", `{"accessToken":"new-tok","agentSecret":"new-secret"}`,
			map[string]string{"X-Warren-Agent-Secret": "old-secret", "X-Access-Token": "old-tok"}, 204, "new-tok"},
		{"the old secret no longer opens it", `{}`,
			map[string]string{"X-Warren-Agent-Secret": "old-secret", "X-Access-Token": "new-tok"}, 401, "new-tok"},
		{"the new secret does", `{}`,
			map[string]string{"X-Warren-Agent-Secret": "new-secret", "X-Access-Token": "new-tok"}, 204, "new-tok"},
	} {
		resp, body := h.do("POST", "/init", tc.body, tc.header)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, resp.StatusCode, tc.status, body)
		}
		if got := h.st.AccessToken(); got != tc.token {
			t.Errorf("%s: token %q, want %q", tc.name, got, tc.token)
		}
	}
	if resp, _ := h.do("GET", tunnelPath, "", map[string]string{"X-Warren-Agent-Secret": "old-secret"}); resp.StatusCode != 401 {
		t.Errorf("tunnel with the old secret = %d, want 401", resp.StatusCode)
	}
}

// A standalone agent (no server secret) has no secret to replace.
func TestInitAgentSecretNeedsOne(t *testing.T) {
	h := newHarness(t, "")
	if resp, body := h.do("POST", "/init", `{"agentSecret":"x"}`, nil); resp.StatusCode != 400 {
		t.Errorf("status %d, want 400 (%s)", resp.StatusCode, body)
	}
}
