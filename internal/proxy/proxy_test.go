package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/envdauth"
	"github.com/warrenhq/warren/internal/sandbox"
)

// echo answers with what reached it: path, host and the headers a test
// cares about.
func echo(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s host=%s id=%q port=%q token=%q",
			name, r.URL.Path, r.Host, r.Header.Get(headerSandboxID), r.Header.Get(headerSandboxPort),
			r.Header.Get("E2b-Traffic-Access-Token"))
	})
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func TestRouting(t *testing.T) {
	env := newTestEnv(t, echo("agent"), func(sb *sandbox.Sandbox) {
		sb.TrafficAccessToken = "tok"
	})
	env.agent.listen(t, 8080, echo("app"))
	env.router.errs["ipaused"] = sandbox.Errorf(sandbox.KindUnavailable, "paused")
	env.router.errs["ibroken"] = sandbox.Errorf(sandbox.KindInternal, "boom")
	env.router.errs["iquota"] = sandbox.Limited("team 'x' has 2 of 2 sandboxes running", sandbox.QuotaRetry)

	notFound := func(id string) string {
		return `{"sandboxId":"` + id + `","message":"The sandbox was not found","code":502}`
	}
	tests := []struct {
		name    string
		host    string
		path    string
		headers map[string]string
		status  int
		body    string
	}{
		{name: "host/agent", host: env.host(49983), path: "/health",
			status: 200, body: `agent /health host=49983-isbx1.warren.test id="" port="" token=""`},
		{name: "host/composite-id", host: "49983-isbx1-client7.warren.test:3000", path: "/x",
			status: 200, body: `agent /x host=49983-isbx1-client7.warren.test:3000 id="" port="" token=""`},
		{name: "host/uppercase", host: "49983-ISBX1.Warren.Test", path: "/x",
			status: 200, body: `agent /x host=49983-ISBX1.Warren.Test id="" port="" token=""`},
		{name: "headers/localhost", host: "localhost:3000", path: "/files",
			headers: map[string]string{headerSandboxID: env.id, headerSandboxPort: "49983"},
			status:  200, body: `agent /files host=localhost:3000 id="" port="" token=""`},
		{name: "headers/ip", host: "127.0.0.1:3000", path: "/a",
			headers: map[string]string{headerSandboxID: env.id, headerSandboxPort: "8080", "e2b-traffic-access-token": "tok"},
			status:  200, body: `app /a host=127.0.0.1:3000 id="" port="" token=""`},
		{name: "headers/shared-host", host: "sandbox.warren.test", path: "/a",
			headers: map[string]string{headerSandboxID: env.id, headerSandboxPort: "49983"},
			status:  200, body: `agent /a host=sandbox.warren.test id="" port="" token=""`},
		{name: "headers/missing-port", host: "localhost", headers: map[string]string{headerSandboxID: env.id},
			status: 400, body: `{"message":"missing or invalid E2b-Sandbox-Id and E2b-Sandbox-Port headers","code":400}`},
		{name: "headers/shared-host-none", host: "sandbox.warren.test",
			status: 400, body: `{"message":"missing or invalid E2b-Sandbox-Id and E2b-Sandbox-Port headers","code":400}`},
		{name: "headers/bad-port", host: "[::1]:3000", headers: map[string]string{headerSandboxID: env.id, headerSandboxPort: "70000"},
			status: 400, body: `{"message":"missing or invalid E2b-Sandbox-Id and E2b-Sandbox-Port headers","code":400}`},
		{name: "host/unparsable", host: "api.warren.test",
			status: 400, body: `{"message":"missing or invalid E2b-Sandbox-Id and E2b-Sandbox-Port headers","code":400}`},
		{name: "unknown", host: "49983-inope.warren.test", status: 502, body: notFound("inope")},
		{name: "paused", host: "49983-ipaused.warren.test", status: 502, body: notFound("ipaused")},
		{name: "auto-resume past the quota", host: "49983-iquota.warren.test", status: 429,
			body: `{"sandboxId":"iquota","message":"team 'x' has 2 of 2 sandboxes running","code":429}`},
		{name: "router-failure", host: "49983-ibroken.warren.test", status: 502, body: notFound("ibroken")},
		{name: "port-closed", host: env.host(9999), headers: map[string]string{"E2B-Traffic-Access-Token": "tok"},
			status: 502, body: `{"sandboxId":"isbx1","message":"The sandbox is running but port is not open","port":9999,"code":502}`},
		{name: "tunnel", host: env.host(8080), path: "/p", headers: map[string]string{"e2b-traffic-access-token": "tok"},
			status: 200, body: `app /p host=8080-isbx1.warren.test id="" port="" token=""`},
		{name: "token/missing", host: env.host(8080),
			status: 403, body: `{"sandboxId":"isbx1","message":"Missing traffic access token","code":403}`},
		{name: "token/wrong", host: env.host(8080), headers: map[string]string{"E2B-TRAFFIC-ACCESS-TOKEN": "nope"},
			status: 403, body: `{"sandboxId":"isbx1","message":"Invalid traffic access token","code":403}`},
		{name: "internal/init", host: env.host(49983), path: "/init",
			status: 403, body: `{"sandboxId":"isbx1","message":"This path is not available from outside the sandbox","code":403}`},
		{name: "internal/dot-segments", host: env.host(49983), path: "/files/../fsfreeze",
			status: 403, body: `{"sandboxId":"isbx1","message":"This path is not available from outside the sandbox","code":403}`},
		{name: "internal/encoded", host: env.host(49983), path: "/%69nit",
			status: 403, body: `{"sandboxId":"isbx1","message":"This path is not available from outside the sandbox","code":403}`},
		{name: "internal/tunnel", host: env.host(49983), path: "/_warren/tunnel?port=22",
			status: 403, body: `{"sandboxId":"isbx1","message":"This path is not available from outside the sandbox","code":403}`},
		{name: "internal/only-on-agent-port", host: env.host(8080), path: "/init", headers: map[string]string{"e2b-traffic-access-token": "tok"},
			status: 200, body: `app /init host=8080-isbx1.warren.test id="" port="" token=""`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := env.request(t, "GET", tc.host, tc.path, nil)
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			status, body := do(t, req)
			if status != tc.status {
				t.Errorf("status %d, want %d (body %s)", status, tc.status, body)
			}
			if diff := cmp.Diff(tc.body, body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorsAreJSON(t *testing.T) {
	env := newTestEnv(t, echo("agent"), nil)
	req := env.request(t, "GET", "49983-inope.warren.test", "/health", nil)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if body["code"] != float64(502) || body["sandboxId"] != "inope" {
		t.Errorf("body %v", body)
	}
}

// A paused sandbox wakes only for a request its agent would accept: the
// access token, or a valid signature on /files. Anything else is refused
// in the agent's own shape; its health check answers 502 (not running) and
// a CORS preflight is answered as the agent would, all without resuming
// it. The agent judges a running sandbox's requests itself.
func TestPausedAgentWakesOnlyForCredentials(t *testing.T) {
	const token = "envd-tok"
	files := func(kv ...string) string {
		q := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		return "/files?" + q.Encode()
	}
	read := envdauth.Signature("/a", envdauth.OperationRead, "", token)
	future := time.Now().Add(time.Minute).Unix()
	past := time.Now().Add(-time.Minute).Unix()
	unauthorized := `{"message":"` + envdauth.UnauthorizedMessage + `","code":401}`
	refused := func(msg string) string { return `{"message":"` + msg + `","code":401}` }
	notRunning := `{"sandboxId":"isbx1","message":"The sandbox was not found","code":502}`
	preflight := map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
	for _, tc := range []struct {
		name, method, path string
		headers            map[string]string
		token              string // the sandbox's envd access token
		running            bool
		want               int
		body               string // "" = not checked
		wakes              bool
	}{
		{name: "no token", method: "POST", path: "/process.Process/List", token: token, want: 401, body: unauthorized},
		{name: "wrong token", method: "POST", path: "/process.Process/List", headers: map[string]string{"X-Access-Token": "nope"}, token: token, want: 401, body: unauthorized},
		{name: "token", method: "POST", path: "/process.Process/List", headers: map[string]string{"X-Access-Token": token}, token: token, want: 200, wakes: true},
		{name: "health", method: "GET", path: "/health", token: token, want: 502, body: notRunning},
		{name: "health HEAD", method: "HEAD", path: "/health", token: token, want: 502},
		{name: "health spelled otherwise", method: "GET", path: "/./health", token: token, want: 502, body: notRunning},
		{name: "health with the token", method: "GET", path: "/health", headers: map[string]string{"X-Access-Token": token}, token: token, want: 502, body: notRunning},
		{name: "health of an open sandbox", method: "GET", path: "/health", want: 502, body: notRunning},
		{name: "preflight", method: "OPTIONS", path: "/process.Process/List", headers: preflight, token: token, want: 204},
		{name: "OPTIONS without Origin", method: "OPTIONS", path: "/process.Process/List", token: token, want: 401, body: unauthorized},
		{name: "files unsigned", method: "GET", path: files("path", "/a"), token: token, want: 401, body: refused("missing signature query parameter")},
		{name: "files forged signature", method: "GET", path: files("path", "/a", "signature", "v1_forged"), token: token, want: 401, body: refused("invalid signature")},
		{name: "files signature of another path", method: "GET", path: files("path", "/b", "signature", read), token: token, want: 401, body: refused("invalid signature")},
		{name: "files read signature used to write", method: "POST", path: files("path", "/a", "signature", read), token: token, want: 401, body: refused("invalid signature")},
		{name: "files signature of another user", method: "GET", path: files("path", "/a", "username", "root", "signature", read), token: token, want: 401, body: refused("invalid signature")},
		{name: "files expiry not signed", method: "GET", path: files("path", "/a", "signature", read, "signature_expiration", strconv.FormatInt(future, 10)), token: token, want: 401, body: refused("invalid signature")},
		{name: "files expired", method: "GET", path: files("path", "/a", "signature", envdauth.SignatureWithExpiration("/a", "read", "", token, past), "signature_expiration", strconv.FormatInt(past, 10)), token: token, want: 401, body: refused("signature is already expired")},
		{name: "files bad expiry", method: "GET", path: files("path", "/a", "signature", read, "signature_expiration", "soon"), token: token, want: 401, body: refused("invalid signature expiration 'soon'")},
		{name: "files wrong token beats a good signature", method: "GET", path: files("path", "/a", "signature", read), headers: map[string]string{"X-Access-Token": "nope"}, token: token, want: 401, body: refused("access token present in header but does not match")},
		{name: "files signed", method: "GET", path: files("path", "/a", "signature", read), token: token, want: 200, wakes: true},
		{name: "files signed with expiry", method: "GET", path: files("path", "/a", "signature", envdauth.SignatureWithExpiration("/a", "read", "", token, future), "signature_expiration", strconv.FormatInt(future, 10)), token: token, want: 200, wakes: true},
		{name: "files upload signed", method: "POST", path: files("path", "/a", "signature", envdauth.Signature("/a", "write", "", token)), token: token, want: 200, wakes: true},
		{name: "files with the token", method: "GET", path: files("path", "/a"), headers: map[string]string{"X-Access-Token": token}, token: token, want: 200, wakes: true},
		{name: "open sandbox: anything", method: "POST", path: "/process.Process/List", want: 200, wakes: true},
		{name: "running: the agent judges", method: "POST", path: "/process.Process/List", token: token, running: true, want: 200},
		{name: "running: health reaches the agent", method: "GET", path: "/health", token: token, running: true, want: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, echo("agent"), func(sb *sandbox.Sandbox) {
				sb.EnvdAccessToken = tc.token
				sb.Lifecycle.AutoResume = true
				if !tc.running {
					sb.State = sandbox.StatePaused
				}
			})
			req := env.request(t, tc.method, env.host(sandbox.AgentPort), tc.path, nil)
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			status, body := do(t, req)
			if status != tc.want {
				t.Fatalf("status %d (%s), want %d", status, body, tc.want)
			}
			if tc.body != "" && body != tc.body {
				t.Errorf("body %s, want %s", body, tc.body)
			}
			if got := env.router.resumed() == 1; got != tc.wakes {
				t.Errorf("resumed = %v, want %v", got, tc.wakes)
			}
		})
	}
}

// A /files URL signed with a sandbox's access token and sent with no
// routing header and a local host (the SDK's downloadUrl and uploadUrl
// with E2B_SANDBOX_URL set) reaches that sandbox's agent, paused or not;
// one no sandbox's token signed gets a 404 and reaches none.
func TestSignedFilesURLFindsItsSandbox(t *testing.T) {
	const token = "envd-tok"
	env := newTestEnv(t, echo("agent"), func(sb *sandbox.Sandbox) {
		sb.EnvdAccessToken = token
		sb.Lifecycle.AutoResume = true
		sb.State = sandbox.StatePaused
	})
	env.router.sbs["iother"] = sandbox.Sandbox{ID: "iother", State: sandbox.StateRunning, EnvdAccessToken: "other-tok"}
	front, _ := url.Parse(env.front.URL)
	signed := func(op, tok string) string {
		q := url.Values{"path": {"/a"}, "username": {"user"}, "signature": {envdauth.Signature("/a", op, "user", tok)}}
		return "/files?" + q.Encode()
	}
	for _, tc := range []struct {
		name, method, path string
		want               int
	}{
		{"download", "GET", signed(envdauth.OperationRead, token), 200},
		{"upload", "POST", signed(envdauth.OperationWrite, token), 200},
		{"read signature used to write", "POST", signed(envdauth.OperationRead, token), 404},
		{"signed by no sandbox", "GET", signed(envdauth.OperationRead, "nobody's"), 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := do(t, env.request(t, tc.method, front.Host, tc.path, nil))
			if status != tc.want {
				t.Fatalf("status %d (%s), want %d", status, body, tc.want)
			}
		})
	}
	if env.router.resumed() != 1 {
		t.Errorf("resumed %d times, want 1 (the download woke it)", env.router.resumed())
	}
}

// The proxy answers a paused sandbox's CORS preflight exactly as the agent
// would have.
func TestPausedAgentPreflight(t *testing.T) {
	env := newTestEnv(t, echo("agent"), func(sb *sandbox.Sandbox) {
		sb.EnvdAccessToken = "envd-tok"
		sb.Lifecycle.AutoResume = true
		sb.State = sandbox.StatePaused
	})
	req := env.request(t, "OPTIONS", env.host(sandbox.AgentPort), "/process.Process/Start", nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type,x-access-token")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := map[string]string{"status": strconv.Itoa(resp.StatusCode)}
	for _, k := range []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers", "Access-Control-Max-Age"} {
		got[k] = resp.Header.Get(k)
	}
	want := map[string]string{
		"status":                       "204",
		"Access-Control-Allow-Origin":  "*",
		"Access-Control-Allow-Methods": "HEAD, GET, POST, PUT, PATCH, DELETE",
		"Access-Control-Allow-Headers": "content-type,x-access-token",
		"Access-Control-Max-Age":       "7200",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("preflight (-want +got):\n%s", diff)
	}
	if env.router.resumed() != 0 {
		t.Error("the preflight resumed the sandbox")
	}
}

// A browser opening a sandbox URL gets a page saying what is wrong, with
// the status code; anything else gets the JSON.
func TestErrorsForBrowsers(t *testing.T) {
	env := newTestEnv(t, echo("agent"), nil)
	for _, tc := range []struct {
		name, host, accept, agent string
		html                      bool
		want                      []string
	}{
		{"browser, not found", "49983-inope.warren.test", "text/html,application/xhtml+xml,*/*;q=0.8", "Mozilla/5.0 (X11; Linux x86_64)", true,
			[]string{"<h1>The sandbox was not found</h1>", "<code>inope</code>", "not running"}},
		{"browser, closed port", env.host(9999), "text/html", "Mozilla/5.0", true,
			[]string{"port is not open", "<code>9999</code>", "Start a server on this port"}},
		{"fetch", "49983-inope.warren.test", "*/*", "node", false, nil},
		{"html without a browser", "49983-inope.warren.test", "text/html", "curl/8.0", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := env.request(t, "GET", tc.host, "/", nil)
			req.Header.Set("Accept", tc.accept)
			req.Header.Set("User-Agent", tc.agent)
			req.Header.Set("E2B-Traffic-Access-Token", "tok")
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("status %d, want 502", resp.StatusCode)
			}
			ct := resp.Header.Get("Content-Type")
			if got := strings.HasPrefix(ct, "text/html"); got != tc.html {
				t.Fatalf("Content-Type %q for %s", ct, tc.name)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("page lacks %q:\n%s", w, b)
				}
			}
			if !tc.html && !json.Valid(b) {
				t.Errorf("body is not JSON: %s", b)
			}
		})
	}
}

func TestMaskRequestHost(t *testing.T) {
	env := newTestEnv(t, echo("agent"), func(sb *sandbox.Sandbox) {
		sb.Network.MaskRequestHost = "localhost:${PORT}"
	})
	env.agent.listen(t, 5173, echo("app"))
	if _, body := do(t, env.request(t, "GET", env.host(5173), "/", nil)); !strings.Contains(body, "host=localhost:5173 ") {
		t.Errorf("app saw %s, want host localhost:5173", body)
	}
	// The agent's own port keeps the client's host.
	if _, body := do(t, env.request(t, "GET", env.host(49983), "/", nil)); !strings.Contains(body, "host=49983-isbx1.warren.test ") {
		t.Errorf("agent saw %s", body)
	}
}

// A port listed in the sandbox's httpsPorts is spoken to over TLS, its
// self-signed certificate taken, the name asked for the host the service
// sees; any other port is plain HTTP, so an HTTPS service there answers
// the proxy's plain request with its own 400.
func TestHTTPSPorts(t *testing.T) {
	secure := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "secure host=%s sni=%s", r.Host, r.TLS.ServerName)
	})
	env := newTestEnv(t, echo("agent"), func(sb *sandbox.Sandbox) { sb.Network.HTTPSPorts = []int{8443} })
	env.agent.listenTLS(t, 8443, secure)
	env.agent.listenTLS(t, 9443, secure)
	env.agent.listen(t, 3000, echo("app"))

	code, body := do(t, env.request(t, "GET", env.host(8443), "/", nil))
	if want := "secure host=" + env.host(8443) + " sni=" + env.host(8443); code != http.StatusOK || body != want {
		t.Errorf("an httpsPorts port: %d %q, want 200 %q", code, body, want)
	}
	if code, body := do(t, env.request(t, "GET", env.host(9443), "/", nil)); code != http.StatusBadRequest {
		t.Errorf("an HTTPS port not listed: %d %q, want the service's 400", code, body)
	}
	if code, body := do(t, env.request(t, "GET", env.host(3000), "/", nil)); code != http.StatusOK || !strings.HasPrefix(body, "app /") {
		t.Errorf("a plain port: %d %q", code, body)
	}

	masked := newTestEnv(t, echo("agent"), func(sb *sandbox.Sandbox) {
		sb.Network.HTTPSPorts, sb.Network.MaskRequestHost = []int{8443}, "localhost:${PORT}"
	})
	masked.agent.listenTLS(t, 8443, secure)
	if _, body := do(t, masked.request(t, "GET", masked.host(8443), "/", nil)); body != "secure host=localhost:8443 sni=localhost" {
		t.Errorf("an httpsPorts port behind maskRequestHost: %q", body)
	}
}

func TestIsSandboxRequest(t *testing.T) {
	tests := []struct {
		host, path string
		headers    map[string]string
		want       bool
	}{
		{host: "127.0.0.1:3000", path: "/files?path=%2Fa&signature=v1_x", want: true},
		{host: "127.0.0.1:3000", path: "/files?path=%2Fa", want: false},
		{host: "127.0.0.1:3000", path: "/sandboxes?signature=v1_x", want: false},
		{host: "49983-abc.warren.test", want: true},
		{host: "8080-abc.other.example:443", want: true},
		{host: "sandbox.warren.test", want: true},
		{host: "localhost:3000", headers: map[string]string{headerSandboxID: "abc"}, want: true},
		{host: "127.0.0.1:3000", headers: map[string]string{headerSandboxPort: "49983"}, want: true},
		{host: "localhost:3000", want: false},
		{host: "127.0.0.1", want: false},
		{host: "[::1]:3000", want: false},
		{host: "api.warren.test", want: false},
		{host: "warren.test", want: false},
		{host: "49983-abc", want: false},
		{host: "0-abc.warren.test", want: false},
		{host: "x49983-abc.warren.test", want: false},
	}
	for _, tc := range tests {
		if tc.path == "" {
			tc.path = "/"
		}
		r, _ := http.NewRequest("GET", "http://x"+tc.path, nil)
		r.Host = tc.host
		for k, v := range tc.headers {
			r.Header.Set(k, v)
		}
		if got := IsSandboxRequest(r, testDomain); got != tc.want {
			t.Errorf("IsSandboxRequest(%q, %v) = %v, want %v", tc.host, tc.headers, got, tc.want)
		}
	}
}
