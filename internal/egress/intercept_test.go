package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/tlsca"
)

// fakeExpander resolves ${e2b.secrets.NAME} of the sandbox "sb" of team
// "team" from secrets, and fails any other placeholder, as the secrets
// store does.
type fakeExpander struct{ secrets map[string]string }

func (f fakeExpander) Expand(_ context.Context, sandboxID, teamID, v string) (string, error) {
	if sandboxID != "sb" || teamID != "team" {
		return "", fmt.Errorf("expanding for sandbox %q of team %q", sandboxID, teamID)
	}
	for name, val := range f.secrets {
		v = strings.ReplaceAll(v, "${e2b.secrets."+name+"}", val)
	}
	if i := strings.Index(v, "${"); i >= 0 {
		return "", fmt.Errorf("placeholder %s does not resolve: no such secret", v[i:])
	}
	return v, nil
}

// echo is a backend answering every request with its Authorization and
// X-Extra headers, and counting the requests it got.
type echo struct{ hits atomic.Int32 }

func (b *echo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.hits.Add(1)
	fmt.Fprintf(w, "auth=%q extra=%q host=%s proto=%s", r.Header.Get("Authorization"), r.Header.Get("X-Extra"), r.Host, r.Proto)
}

func withRules(n sandbox.Network, key string, headers map[string]string) sandbox.Network {
	n.Rules = map[string][]sandbox.NetworkRule{key: {{Headers: headers}}}
	return n
}

var openNet = sandbox.Network{AllowInternetAccess: true}

// interceptor completes a Config with a CA in dir, upstream roots and the
// fake secrets.
func interceptor(t testing.TB, roots *x509.CertPool) (func(*Config), *tlsca.Authority) {
	ca, err := tlsca.LoadAuthority(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *Config) {
		c.Authority, c.RootCAs = ca, roots
		c.Expander = fakeExpander{secrets: map[string]string{"TOKEN": "s3cret"}}
	}, ca
}

// send writes raw requests on one connection through the gateway and
// reads as many responses.
func sendOn(t *testing.T, c net.Conn, hosts ...string) []string {
	t.Helper()
	br := bufio.NewReader(c)
	var out []string
	for _, h := range hosts {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nAuthorization: mine\r\n\r\n", h)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			out = append(out, "error: "+err.Error())
			return out
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out = append(out, fmt.Sprintf("%d %s", resp.StatusCode, b))
	}
	return out
}

// send is sendOn on a new connection; a connection the gateway refuses
// may be reset before the dial returns, which counts as an error too.
func (e *env) send(t *testing.T, hosts ...string) []string {
	t.Helper()
	c, err := net.Dial("tcp", netip.AddrPortFrom(loopback, e.ports.Gateway).String())
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return sendOn(t, c, hosts...)
}

func TestInterceptHTTP(t *testing.T) {
	b := &echo{}
	backend := httptest.NewServer(b)
	defer backend.Close()
	configure, _ := interceptor(t, nil)
	rules := withRules(openNet, "api.test", map[string]string{"Authorization": "Bearer ${e2b.secrets.TOKEN}", "x-extra": "plain"})
	e := newConfigEnv(t, nil, rules, map[string]netip.Addr{"api.test": loopback, "other.test": loopback}, configure)
	e.goingTo(strings.TrimPrefix(backend.URL, "http://"))

	// Not resolved through the forwarder: nothing proves this address is
	// api.test, so the headers do not go to it.
	if got := e.send(t, "api.test"); !strings.Contains(got[0], `auth="mine"`) {
		t.Fatalf("unresolved name got the rules: %v", got)
	}
	e.lookup(t, "udp", "api.test")
	e.lookup(t, "udp", "other.test")
	got := e.send(t, "api.test", "API.test.", "other.test")
	for i, want := range []string{`200 auth="Bearer s3cret" extra="plain" host=api.test`, `200 auth="Bearer s3cret"`, "421 "} {
		if !strings.HasPrefix(got[i], want) {
			t.Errorf("request %d on one connection: %q, want %q", i, got[i], want)
		}
	}
	if got := e.send(t, "other.test"); !strings.Contains(got[0], `auth="mine" extra=""`) {
		t.Errorf("a host without rules: %v", got)
	}

	// An update of the rules applies to the next request, on the same
	// connection too.
	c := e.through(t)
	sendOn(t, c, "api.test")
	e.setRules(withRules(openNet, "api.test", map[string]string{"Authorization": "v2"}))
	if got := sendOn(t, c, "api.test"); !strings.Contains(got[0], `auth="v2"`) {
		t.Errorf("after the update: %v", got)
	}
}

func TestInterceptFailsClosed(t *testing.T) {
	b := &echo{}
	backend := httptest.NewServer(b)
	defer backend.Close()
	configure, _ := interceptor(t, nil)
	e := newConfigEnv(t, nil, withRules(openNet, "127.0.0.1", map[string]string{"Authorization": "Bearer ${e2b.secrets.NOPE}"}), nil, configure)
	e.goingTo(strings.TrimPrefix(backend.URL, "http://"))
	got := e.send(t, "127.0.0.1")
	if !strings.HasPrefix(got[0], "502 ") || !strings.Contains(got[0], "${e2b.secrets.NOPE}") || !strings.Contains(got[0], "Authorization") {
		t.Errorf("unknown secret: %v", got)
	}
	e.setRules(withRules(openNet, "127.0.0.0/8", map[string]string{"X-Extra": "${e2b.secrets.TOKEN}\r\nEvil: 1"}))
	if got := e.send(t, "127.0.0.1"); !strings.HasPrefix(got[0], "502 ") {
		t.Errorf("a value with a line break: %v", got)
	}

	// Without a secrets store no placeholder resolves.
	e2 := newConfigEnv(t, nil, withRules(openNet, "127.0.0.1", map[string]string{"Authorization": "${e2b.secrets.TOKEN}"}), nil, func(*Config) {})
	e2.goingTo(strings.TrimPrefix(backend.URL, "http://"))
	if got := e2.send(t, "127.0.0.1"); !strings.HasPrefix(got[0], "502 ") {
		t.Errorf("no expander: %v", got)
	}
	if n := b.hits.Load(); n != 0 {
		t.Errorf("the backend got %d refused requests", n)
	}
}

// tlsGet sends one GET to host through the gateway over TLS trusting
// roots, with HTTP/2 when h2, and returns the status and body, and the
// certificate the client was shown.
func (e *env) tlsGet(t *testing.T, host string, roots *x509.CertPool, h2 bool) (string, *x509.Certificate, error) {
	t.Helper()
	var peer *x509.Certificate
	tr := &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			return net.Dial("tcp", netip.AddrPortFrom(loopback, e.ports.Gateway).String())
		},
		TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: host},
		ForceAttemptHTTP2: h2,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "https://"+host+"/", nil)
	req.Header.Set("Authorization", "mine")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := tr.RoundTrip(req.WithContext(ctx))
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		peer = resp.TLS.PeerCertificates[0]
	}
	return fmt.Sprintf("%d %s client=%s", resp.StatusCode, b, resp.Proto), peer, nil
}

// tlsSetup starts an HTTPS backend (HTTP/2 on) serving h, and returns it
// with the roots that verify it, a Config completion intercepting with a
// new CA that upstream roots trust, and the roots that verify that CA.
func tlsSetup(tb testing.TB, h http.Handler) (backend *httptest.Server, backendRoots *x509.CertPool, configure func(*Config), caRoots *x509.CertPool) {
	backend = httptest.NewUnstartedServer(h)
	backend.EnableHTTP2 = true
	backend.StartTLS()
	tb.Cleanup(backend.Close)
	backendRoots = x509.NewCertPool()
	backendRoots.AddCert(backend.Certificate())
	configure, ca := interceptor(tb, backendRoots)
	caRoots = x509.NewCertPool()
	caRoots.AppendCertsFromPEM(ca.CertPEM())
	return backend, backendRoots, configure, caRoots
}

func TestInterceptTLS(t *testing.T) {
	backend, backendRoots, configure, caRoots := tlsSetup(t, &echo{})

	// httptest's certificate is for example.com, *.example.com and 127.0.0.1.
	rules := withRules(openNet, "example.com", map[string]string{"Authorization": "Bearer ${e2b.secrets.TOKEN}"})
	e := newConfigEnv(t, nil, rules, nil, configure)
	e.goingTo(strings.TrimPrefix(backend.URL, "https://"))

	for _, h2 := range []bool{false, true} {
		got, peer, err := e.tlsGet(t, "example.com", caRoots, h2)
		if err != nil || !strings.HasPrefix(got, `200 auth="Bearer s3cret"`) {
			t.Fatalf("h2=%v: %q, %v", h2, got, err)
		}
		if !strings.Contains(got, "proto=HTTP/2.0") {
			t.Errorf("h2=%v: the gateway did not reach the backend over HTTP/2: %q", h2, got)
		}
		if want := map[bool]string{false: "client=HTTP/1.1", true: "client=HTTP/2.0"}[h2]; !strings.HasSuffix(got, want) {
			t.Errorf("h2=%v: the client and the gateway spoke %q, want %s", h2, got, want)
		}
		if peer.Issuer.CommonName != "Warren local CA" {
			t.Errorf("h2=%v: the client saw a certificate of %q", h2, peer.Issuer.CommonName)
		}
	}
	// A host without rules is not intercepted: the client sees the
	// backend's own certificate and its own header.
	got, peer, err := e.tlsGet(t, "www.example.com", backendRoots, false)
	if err != nil || !strings.HasPrefix(got, `200 auth="mine"`) || !peer.Equal(backend.Certificate()) {
		t.Errorf("host without rules: %q, %v", got, err)
	}
	// An address rule applies to a client that sends no server name.
	e.setRules(withRules(openNet, "127.0.0.1", map[string]string{"Authorization": "by-ip"}))
	if got, _, err := e.tlsGet(t, "127.0.0.1", caRoots, false); err != nil || !strings.HasPrefix(got, `200 auth="by-ip"`) {
		t.Errorf("address rule: %q, %v", got, err)
	}
}

// TestInterceptWithTheSandboxesOwnTLS: a sandbox that brings its CA,
// roots and expander (a node agent's, for one control plane's sandboxes)
// is intercepted with them, the server having none.
func TestInterceptWithTheSandboxesOwnTLS(t *testing.T) {
	backend, backendRoots, withCA, caRoots := tlsSetup(t, &echo{})
	var own Config
	withCA(&own)
	configure := func(c *Config) {
		policy := c.Policy
		c.Policy = func(src netip.Addr) (Sandbox, bool) {
			sb, ok := policy(src)
			sb.Authority, sb.RootCAs, sb.Expander = own.Authority, own.RootCAs, own.Expander
			return sb, ok
		}
	}
	e := newConfigEnv(t, nil, withRules(openNet, "example.com", map[string]string{"Authorization": "Bearer ${e2b.secrets.TOKEN}"}), nil, configure)
	e.goingTo(strings.TrimPrefix(backend.URL, "https://"))
	got, peer, err := e.tlsGet(t, "example.com", caRoots, false)
	if err != nil || !strings.HasPrefix(got, `200 auth="Bearer s3cret"`) {
		t.Fatalf("%q, %v", got, err)
	}
	if !bytes.Equal(peer.RawIssuer, mustCert(t, own.Authority.CertPEM()).RawSubject) {
		t.Errorf("the client saw a certificate of %q", peer.Issuer)
	}
	if _, _, err := e.tlsGet(t, "example.com", backendRoots, false); err == nil {
		t.Error("the backend's roots verified the gateway's certificate")
	}
}

func mustCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(pemBytes)
	if b == nil {
		t.Fatal("no PEM")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestInterceptVerifiesUpstream: the gateway's own TLS to the host is
// verified; a host it cannot verify gets no request, and the client a 502.
func TestInterceptVerifiesUpstream(t *testing.T) {
	b := &echo{}
	backend := httptest.NewTLSServer(b)
	defer backend.Close()
	configure, ca := interceptor(t, x509.NewCertPool())
	caRoots := x509.NewCertPool()
	caRoots.AppendCertsFromPEM(ca.CertPEM())
	e := newConfigEnv(t, nil, withRules(openNet, "example.com", map[string]string{"Authorization": "${e2b.secrets.TOKEN}"}), nil, configure)
	e.goingTo(strings.TrimPrefix(backend.URL, "https://"))
	got, _, err := e.tlsGet(t, "example.com", caRoots, false)
	if err != nil || !strings.HasPrefix(got, "502 ") || !strings.Contains(got, "certificate") {
		t.Errorf("unverified upstream: %q, %v", got, err)
	}
	if b.hits.Load() != 0 {
		t.Error("the unverified host got the request")
	}
}

// TestInterceptNeedsCA: without a CA a TLS connection to a host with rules
// is refused rather than relayed without its headers.
func TestInterceptNeedsCA(t *testing.T) {
	backend := httptest.NewTLSServer(&echo{})
	defer backend.Close()
	e := newEnv(t, withRules(openNet, "example.com", map[string]string{"A": "b"}), nil)
	e.goingTo(strings.TrimPrefix(backend.URL, "https://"))
	if _, _, err := e.tlsGet(t, "example.com", nil, false); err == nil {
		t.Error("TLS to a host with rules went through without a CA")
	}
}

// TestSilentClientRelayed: a connection allowed by its address from a
// sandbox with rules, whose client waits for the server to speak first,
// is relayed after a moment.
func TestSilentClientRelayed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			io.WriteString(c, "220 hello\r\n")
			c.Close()
		}
	}()
	e := newEnv(t, withRules(openNet, "api.test", map[string]string{"A": "b"}), nil)
	e.goingTo(l.Addr().String())
	line, err := bufio.NewReader(e.through(t)).ReadString('\n')
	if err != nil || line != "220 hello\r\n" {
		t.Errorf("server-first protocol: %q, %v", line, err)
	}
}

func TestRuleSet(t *testing.T) {
	r := func(v string) []sandbox.NetworkRule {
		return []sandbox.NetworkRule{{Headers: map[string]string{"X": v}}}
	}
	rules := map[string][]sandbox.NetworkRule{
		"api.example.com":    r("exact"),
		"*.example.com":      r("wild"),
		"*.deep.example.com": r("deeper"),
		"10.0.0.5":           r("ip"),
		"10.0.0.0/8":         r("wide"),
		"10.1.0.0/16":        r("narrow"),
		"Mixed.Case.Example": r("case"),
	}
	for _, c := range []struct {
		name, dst, want string
	}{
		{"api.example.com", "192.0.2.1", "api.example.com"},
		{"API.example.com.", "192.0.2.1", "api.example.com"},
		{"x.example.com", "192.0.2.1", "*.example.com"},
		{"a.deep.example.com", "192.0.2.1", "*.deep.example.com"},
		{"deep.example.com", "192.0.2.1", "*.example.com"},
		{"example.com", "192.0.2.1", ""},
		{"notexample.com", "192.0.2.1", ""},
		{"mixed.case.example", "192.0.2.1", "Mixed.Case.Example"},
		{"", "10.0.0.5", "10.0.0.5"},
		{"10.0.0.5", "10.0.0.5", "10.0.0.5"},
		{"", "10.1.2.3", "10.1.0.0/16"},
		{"", "10.2.2.3", "10.0.0.0/8"},
		{"other.test", "10.2.2.3", "10.0.0.0/8"},
		{"x.example.com", "10.0.0.5", "*.example.com"},
		{"", "192.0.2.1", ""},
	} {
		if got, _ := ruleSet(rules, c.name, netip.MustParseAddr(c.dst)); got != c.want {
			t.Errorf("ruleSet(%q, %s) = %q, want %q", c.name, c.dst, got, c.want)
		}
	}
}

func FuzzRuleSet(f *testing.F) {
	f.Add("*.example.com", "a.example.com", "10.0.0.1")
	f.Add("10.0.0.0/8", "", "10.1.1.1")
	f.Add("*", "x", "::1")
	f.Add("*.", ".", "0.0.0.0")
	f.Fuzz(func(t *testing.T, key, name, dst string) {
		a, err := netip.ParseAddr(dst)
		if err != nil {
			return
		}
		rules := map[string][]sandbox.NetworkRule{key: {{Headers: map[string]string{"X": "y"}}}}
		got, rs := ruleSet(rules, name, a)
		if got != "" && (got != key || len(rs) != 1) {
			t.Fatalf("ruleSet picked %q (%d rules) from the one key %q", got, len(rs), key)
		}
		if got == "" && key == normalName(name) && name != "" && !isAddr(name) {
			t.Fatalf("the exact name %q did not pick its own rules", name)
		}
	})
}

func isAddr(s string) bool {
	_, err := netip.ParseAddr(normalName(s))
	return err == nil
}

func TestSameHost(t *testing.T) {
	for _, c := range []struct {
		hostport, host string
		want           bool
	}{
		{"api.test", "api.test", true},
		{"API.test.:8080", "api.test", true},
		{"[::1]:443", "::1", true},
		{"127.0.0.1", "127.0.0.1", true},
		{"127.0.0.2", "127.0.0.1", false},
		{"evil.test", "api.test", false},
		{"api.test.evil", "api.test", false},
	} {
		if got := sameHost(c.hostport, c.host); got != c.want {
			t.Errorf("sameHost(%q, %q) = %v", c.hostport, c.host, got)
		}
	}
}

// TestInterceptStreams: an intercepted response of unknown length reaches
// the sandbox as the host writes it, not when it ends (event streams).
func TestInterceptStreams(t *testing.T) {
	more := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		<-more
		io.WriteString(w, "second\n")
	}))
	defer backend.Close()
	defer close(more)
	configure, _ := interceptor(t, nil)
	e := newConfigEnv(t, nil, withRules(openNet, "127.0.0.1", map[string]string{"A": "b"}), nil, configure)
	e.goingTo(strings.TrimPrefix(backend.URL, "http://"))
	c := e.through(t)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("the first part of the stream: %q, %v (held back until the end?)", line, err)
	}
}

// TestGatewayNeighbour: a sandbox whose TCP all goes through the gateway
// (it has rules) reaches a neighbour sandbox only as the firewall would
// let it: same team, and its allowOut names the neighbour's address.
func TestGatewayNeighbour(t *testing.T) {
	neighbour := netip.MustParseAddr("127.0.0.2")
	l, err := net.Listen("tcp", netip.AddrPortFrom(neighbour, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	backend := &httptest.Server{Listener: l, Config: &http.Server{Handler: &echo{}}}
	backend.Start()
	defer backend.Close()
	var team atomic.Value // the neighbour's
	team.Store("team")
	shut := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	e := newConfigEnv(t, shut, withRules(sandbox.Network{AllowInternetAccess: true, AllowOut: []string{"127.0.0.2"}}, "api.test", map[string]string{"A": "b"}), nil,
		func(c *Config) {
			self := c.Policy
			c.Policy = func(src netip.Addr) (Sandbox, bool) {
				if src == neighbour {
					return Sandbox{ID: "other", TeamID: team.Load().(string)}, true
				}
				return self(src)
			}
		})
	e.goingTo(l.Addr().String())
	if got := e.send(t, "127.0.0.2"); !strings.HasPrefix(got[0], "200 ") {
		t.Errorf("a named neighbour of the team: %v", got)
	}
	team.Store("another team")
	if got := e.send(t, "127.0.0.2"); !strings.HasPrefix(got[0], "error:") {
		t.Errorf("another team's sandbox: %v", got)
	}
	team.Store("team")
	e.setRules(withRules(sandbox.Network{AllowInternetAccess: true, AllowOut: []string{"127.0.0.0/24"}}, "api.test", map[string]string{"A": "b"}))
	if got := e.send(t, "127.0.0.2"); !strings.HasPrefix(got[0], "error:") {
		t.Errorf("a neighbour allowOut does not name: %v", got)
	}
}
