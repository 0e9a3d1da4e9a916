package egress

import (
	"bufio"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/warrenhq/warren/internal/sandbox"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// fakeResolver answers A queries for the names in addrs over UDP and TCP
// on one loopback port, NXDOMAIN for others, and counts the queries.
type fakeResolver struct {
	addrs map[string]netip.Addr
	addr  string

	mu      sync.Mutex
	queries []string
}

func newFakeResolver(t testing.TB, addrs map[string]netip.Addr) *fakeResolver {
	t.Helper()
	r := &fakeResolver{addrs: addrs}
	// One port for UDP and TCP: another process may hold the TCP side of
	// the port UDP got, so try a few.
	var pc net.PacketConn
	var l net.Listener
	var err error
	for range 10 {
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if l, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close(); l.Close() })
	r.addr = pc.LocalAddr().String()
	go func() {
		buf := make([]byte, 4096)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(r.answer(t, buf[:n]), from)
		}
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			msg, err := readTCPMessage(c)
			if err == nil {
				writeTCPMessage(c, r.answer(t, msg))
			}
			c.Close()
		}
	}()
	return r
}

func (r *fakeResolver) answer(t testing.TB, msg []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		t.Errorf("resolver got garbage: %v", err)
		return nil
	}
	q, _ := p.Question()
	name := strings.TrimSuffix(q.Name.String(), ".")
	r.mu.Lock()
	r.queries = append(r.queries, name)
	r.mu.Unlock()
	a, ok := r.addrs[name]
	rh := dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired}
	if !ok {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	if ok {
		b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 30}, dnsmessage.AResource{A: a.As4()})
	}
	out, _ := b.Finish()
	return out
}

func (r *fakeResolver) asked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.queries...)
}

// env is a Server on loopback whose only sandbox is 127.0.0.1 with rules,
// and whose redirected connections all were going to dst.
type env struct {
	srv   *Server
	ports Ports
	res   *fakeResolver

	mu    sync.Mutex
	rules sandbox.Network
	dst   netip.AddrPort
}

// newEnv's upstream, when given, replaces the fake resolver as the
// forwarder's upstream.
func newEnv(t *testing.T, rules sandbox.Network, names map[string]netip.Addr, upstream ...string) *env {
	t.Helper()
	return newShutEnv(t, nil, rules, names, upstream...)
}

// newShutEnv is newEnv with a gateway that never connects into shut.
func newShutEnv(t *testing.T, shut []netip.Prefix, rules sandbox.Network, names map[string]netip.Addr, upstream ...string) *env {
	t.Helper()
	return newConfigEnv(t, shut, rules, names, func(*Config) {}, upstream...)
}

// newConfigEnv is newShutEnv with a Config that configure completes.
func newConfigEnv(t testing.TB, shut []netip.Prefix, rules sandbox.Network, names map[string]netip.Addr, configure func(*Config), upstream ...string) *env {
	t.Helper()
	e := &env{rules: rules, res: newFakeResolver(t, names)}
	if len(upstream) == 0 {
		upstream = []string{e.res.addr}
	}
	cfg := Config{
		Policy: func(src netip.Addr) (Sandbox, bool) {
			e.mu.Lock()
			defer e.mu.Unlock()
			return Sandbox{ID: "sb", TeamID: "team", Network: e.rules}, src == loopback
		},
		Upstream:    upstream,
		originalDst: func(net.Conn) (netip.AddrPort, error) { e.mu.Lock(); defer e.mu.Unlock(); return e.dst, nil },
		remote:      func(a netip.Addr) bool { return a == loopback },
	}
	configure(&cfg)
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	if e.ports, err = srv.Listen(loopback, shut...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return e
}

// setRules replaces the sandbox's rules, as an update of its network does.
func (e *env) setRules(n sandbox.Network) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rules = n
}

func (e *env) goingTo(dst string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dst = netip.MustParseAddrPort(dst)
}

// lookup asks the forwarder for name's A records over network.
func (e *env) lookup(t *testing.T, network, name string) (dnsmessage.RCode, []netip.Addr) {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 4242, RecursionDesired: true})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name + "."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, _ := b.Finish()
	c, err := net.Dial(network, netip.AddrPortFrom(loopback, e.ports.DNS).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var reply []byte
	if network == "tcp" {
		if err := writeTCPMessage(c, q); err != nil {
			t.Fatal(err)
		}
		reply, err = readTCPMessage(c)
	} else {
		c.Write(q)
		buf := make([]byte, 4096)
		var n int
		n, err = c.Read(buf)
		reply = buf[:n]
	}
	if err != nil {
		t.Fatalf("lookup %s over %s: %v", name, network, err)
	}
	var p dnsmessage.Parser
	h, err := p.Start(reply)
	if err != nil || h.ID != 4242 {
		t.Fatalf("lookup %s: bad reply %v (id %d)", name, err, h.ID)
	}
	p.SkipAllQuestions()
	var out []netip.Addr
	for {
		rh, err := p.AnswerHeader()
		if err != nil {
			break
		}
		if rh.Type != dnsmessage.TypeA {
			p.SkipAnswer()
			continue
		}
		a, _ := p.AResource()
		out = append(out, netip.AddrFrom4(a.A))
	}
	return h.RCode, out
}

// closedNet denies everything but example domains.
func closedNet(domains ...string) sandbox.Network {
	return sandbox.Network{DenyOut: []string{"0.0.0.0/0"}, AllowOut: domains}
}

func TestDNSAnswersOnlyAllowedNames(t *testing.T) {
	e := newEnv(t, closedNet("allowed.test", "*.wild.test"), map[string]netip.Addr{
		"allowed.test": loopback, "a.wild.test": loopback, "other.test": loopback,
	})
	for _, network := range []string{"udp", "tcp"} {
		for name, want := range map[string]dnsmessage.RCode{
			"allowed.test": dnsmessage.RCodeSuccess, "a.wild.test": dnsmessage.RCodeSuccess,
			"other.test": dnsmessage.RCodeRefused, "wild.test": dnsmessage.RCodeRefused,
		} {
			rcode, addrs := e.lookup(t, network, name)
			if rcode != want {
				t.Errorf("%s %s: rcode %v, want %v", network, name, rcode, want)
			}
			if want == dnsmessage.RCodeSuccess && (len(addrs) != 1 || addrs[0] != loopback) {
				t.Errorf("%s %s: addresses %v", network, name, addrs)
			}
		}
	}
	for _, q := range e.res.asked() {
		if q == "other.test" || q == "wild.test" {
			t.Errorf("a refused name reached the upstream resolver: %s", q)
		}
	}
	if !e.srv.answers.has(loopback, loopback, "allowed.test") || e.srv.answers.has(loopback, loopback, "other.test") {
		t.Error("the table should hold the allowed name's answer, and only it")
	}
	e.srv.Forget(loopback)
	if e.srv.answers.has(loopback, loopback, "allowed.test") {
		t.Error("Forget kept the answers")
	}
}

// TestDNSOneStandardQuestion: a query that asks more than one question,
// the first allowed and the next not, or that is no standard query, is
// answered by the forwarder itself and never reaches the upstream.
func TestDNSOneStandardQuestion(t *testing.T) {
	e := newEnv(t, closedNet("allowed.test"), map[string]netip.Addr{"allowed.test": loopback, "other.test": loopback})
	src := netip.MustParseAddr("127.0.0.1")
	for _, tt := range []struct {
		name  string
		op    dnsmessage.OpCode
		names []string
		rcode dnsmessage.RCode
	}{
		{"two questions", 0, []string{"allowed.test.", "other.test."}, dnsmessage.RCodeFormatError},
		{"an update", 5, []string{"allowed.test."}, dnsmessage.RCodeNotImplemented},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, OpCode: tt.op, RecursionDesired: true})
			b.StartQuestions()
			for _, n := range tt.names {
				b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(n), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
			}
			q, _ := b.Finish()
			var p dnsmessage.Parser
			h, err := p.Start(e.srv.resolve(src, q, "udp"))
			if err != nil || h.ID != 7 || !h.Response || h.RCode != tt.rcode {
				t.Errorf("answer %+v, %v; want %v", h, err, tt.rcode)
			}
		})
	}
	if asked := e.res.asked(); len(asked) != 0 {
		t.Errorf("the upstream was asked %v", asked)
	}
	if e.srv.answers.has(src, loopback, "allowed.test") {
		t.Error("an answer was remembered")
	}
}

func TestDNSForwardsEverythingWhenTheResolverIsReachable(t *testing.T) {
	// The resolver (127.0.0.1) is allowed by address: refusing names would
	// protect nothing.
	e := newEnv(t, sandbox.Network{DenyOut: []string{"0.0.0.0/0"}, AllowOut: []string{"127.0.0.0/8", "allowed.test"}},
		map[string]netip.Addr{"other.test": loopback})
	if rcode, _ := e.lookup(t, "udp", "other.test"); rcode != dnsmessage.RCodeSuccess {
		t.Errorf("other.test: %v", rcode)
	}
	if rcode, _ := e.lookup(t, "udp", "missing.test"); rcode != dnsmessage.RCodeNameError {
		t.Errorf("missing.test: %v, want the upstream's NXDOMAIN", rcode)
	}
}

func TestDNSUpstreamDown(t *testing.T) {
	e := newEnv(t, closedNet("allowed.test"), nil, "127.0.0.1:1")
	if rcode, _ := e.lookup(t, "udp", "allowed.test"); rcode != dnsmessage.RCodeServerFailure {
		t.Errorf("rcode %v, want SERVFAIL", rcode)
	}
}

// through connects to the gateway as a redirected client would.
func (e *env) through(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", netip.AddrPortFrom(loopback, e.ports.Gateway).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return c
}

// get sends a GET with host through the gateway; it returns the body, or
// the error of a connection the gateway closed.
func (e *env) get(t *testing.T, host string) (string, error) {
	t.Helper()
	// A connection refused by its address alone is reset at once, which
	// the dial itself may see.
	c, err := net.Dial("tcp", netip.AddrPortFrom(loopback, e.ports.Gateway).String())
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestGatewayHTTP(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello "+r.Host)
	}))
	defer backend.Close()
	e := newEnv(t, closedNet("allowed.test"), map[string]netip.Addr{"allowed.test": loopback, "other.test": loopback})
	e.goingTo(strings.TrimPrefix(backend.URL, "http://"))
	port := backend.URL[strings.LastIndex(backend.URL, ":"):]

	if _, err := e.get(t, "allowed.test"+port); err == nil {
		t.Fatal("a name the sandbox never resolved went through")
	}
	e.lookup(t, "udp", "allowed.test")
	if body, err := e.get(t, "allowed.test"+port); err != nil || body != "hello allowed.test"+port {
		t.Fatalf("allowed name: %q, %v", body, err)
	}
	if body, err := e.get(t, "ALLOWED.test."); err != nil || !strings.HasPrefix(body, "hello") {
		t.Errorf("allowed name in another case with a dot: %q, %v", body, err)
	}
	if _, err := e.get(t, "other.test"); err == nil {
		t.Error("a name not in allowOut went through")
	}
	// The name is allowed and resolved, but not to where this goes.
	e.goingTo("127.0.0.2" + port)
	if _, err := e.get(t, "allowed.test"); err == nil {
		t.Error("an allowed name went through to an address it did not resolve to")
	}
	e.goingTo("127.0.0.1:49983")
	if _, err := e.get(t, "allowed.test"); err == nil {
		t.Error("the gateway reached an agent port")
	}
}

func TestGatewayTLS(t *testing.T) {
	backend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secure "+r.TLS.ServerName)
	}))
	defer backend.Close()
	e := newEnv(t, closedNet("*.allowed.test"), map[string]netip.Addr{"api.allowed.test": loopback, "allowed.test": loopback})
	e.goingTo(strings.TrimPrefix(backend.URL, "https://"))
	e.lookup(t, "udp", "api.allowed.test")

	get := func(name string) (string, error) {
		c := e.through(t)
		tc := tls.Client(c, &tls.Config{ServerName: name, InsecureSkipVerify: true})
		if err := tc.Handshake(); err != nil {
			return "", err
		}
		io.WriteString(tc, "GET / HTTP/1.1\r\nHost: "+name+"\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get("api.allowed.test"); err != nil || body != "secure api.allowed.test" {
		t.Fatalf("allowed server name: %q, %v", body, err)
	}
	if _, err := get("allowed.test"); err == nil {
		t.Error("the wildcard's apex went through")
	}
	if _, err := get("evil.test"); err == nil {
		t.Error("a server name not in allowOut went through")
	}
}

// TestGatewayRefusesSandboxNetwork: an allowed name that resolved to an
// address on the sandbox network opens nothing; sandboxes reach each
// other only by the addresses the firewall lets through.
func TestGatewayRefusesSandboxNetwork(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	defer backend.Close()
	for _, tt := range []struct {
		name  string
		shut  []netip.Prefix
		reach bool
	}{
		{"outside", []netip.Prefix{netip.MustParsePrefix("172.30.0.1/16")}, true},
		{"sandbox network", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}, false},
		{"another network of the server's", []netip.Prefix{netip.MustParsePrefix("172.30.0.1/16"), netip.MustParsePrefix("127.0.0.1/32")}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newShutEnv(t, tt.shut, closedNet("allowed.test"), map[string]netip.Addr{"allowed.test": loopback})
			e.goingTo(strings.TrimPrefix(backend.URL, "http://"))
			e.lookup(t, "udp", "allowed.test")
			body, err := e.get(t, "allowed.test")
			if tt.reach && (err != nil || body != "hello") {
				t.Errorf("refused: %q, %v", body, err)
			}
			if !tt.reach && err == nil {
				t.Errorf("went through: %q", body)
			}
		})
	}
}

func TestGatewayRefusesOtherProtocols(t *testing.T) {
	e := newEnv(t, closedNet("allowed.test"), map[string]netip.Addr{"allowed.test": loopback})
	e.lookup(t, "udp", "allowed.test")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e.goingTo(l.Addr().String())
	c := e.through(t)
	io.WriteString(c, "SSH-2.0-probe\r\n")
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("a stream that is neither TLS nor HTTP was relayed")
	}
}

func TestSniff(t *testing.T) {
	for in, want := range map[string]string{
		"GET / HTTP/1.1\r\nHost: Example.COM:8080\r\n\r\n":    "example.com",
		"POST /x HTTP/1.1\r\nHost: [::1]:80\r\n\r\nbody":      "::1",
		"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n": "a.test",
	} {
		if got, err := sniff(strings.NewReader(in)); err != nil || got != want {
			t.Errorf("sniff(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "\x16", "\x16\x03\x01\x00\x05hello", "SSH-2.0-x\r\n", "GET / HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("A: b\r\n", 4000)} {
		if got, err := sniff(strings.NewReader(in)); err == nil {
			t.Errorf("sniff(%.40q) = %q, want an error", in, got)
		}
	}
}

func FuzzSniff(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"))
	f.Add(clientHello(f, "a.test"))
	f.Add([]byte("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"))
	f.Fuzz(func(t *testing.T, in []byte) {
		name, err := sniff(strings.NewReader(string(in)))
		if err == nil && name == "" {
			t.Error("no error and no name")
		}
	})
}

// clientHello is the first flight of a TLS client asking for name.
func clientHello(tb testing.TB, name string) []byte {
	tb.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		defer b.Close()
		tls.Client(b, &tls.Config{ServerName: name, InsecureSkipVerify: true}).Handshake()
	}()
	buf := make([]byte, 4096)
	n, err := a.Read(buf)
	if err != nil && !errors.Is(err, io.EOF) {
		tb.Fatal(err)
	}
	return buf[:n]
}

func TestSniffClientHello(t *testing.T) {
	if got, err := sniff(strings.NewReader(string(clientHello(t, "Sub.Example.org")))); err != nil || got != "sub.example.org" {
		t.Errorf("sniff(client hello) = %q, %v", got, err)
	}
}

// TestCloseEndsRelays: Close returns while a relayed connection is still
// open at both ends.
func TestCloseEndsRelays(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // a backend that reads and never answers
			go io.Copy(io.Discard, c)
		}
	}()
	e := newEnv(t, closedNet("allowed.test"), map[string]netip.Addr{"allowed.test": loopback})
	e.lookup(t, "udp", "allowed.test")
	e.goingTo(l.Addr().String())
	c := e.through(t)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	time.Sleep(100 * time.Millisecond) // the relay is up
	done := make(chan struct{})
	go func() { e.srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waits for a relay that never ends")
	}
}

// TestIsRemote: the gateway connects to no address of the host's and to
// none on a bridge's network (where containers live), but to addresses
// that other links lead to.
func TestIsRemote(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "169.254.169.254", "::1", "fe80::1", "0.0.0.0"} {
		if isRemote(netip.MustParseAddr(a)) {
			t.Errorf("isRemote(%s)", a)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("skipping the bridge cases: making interfaces needs root")
	}
	b := make([]byte, 3)
	rand.Read(b)
	id := hex.EncodeToString(b)
	bridge, veth := "wet"+id+"b", "wet"+id+"v"
	for _, args := range [][]string{
		{"link", "add", bridge, "type", "bridge"}, {"addr", "add", "172.31.253.1/24", "dev", bridge},
		{"link", "add", veth, "type", "veth", "peer", "name", veth + "p"}, {"addr", "add", "172.31.252.1/24", "dev", veth},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Skipf("skipping: cannot make test interfaces: %v: %s", err, out)
		}
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", bridge).Run(); exec.Command("ip", "link", "del", veth).Run() })
	for a, want := range map[string]bool{"172.31.253.1": false, "172.31.253.7": false, "172.31.252.1": false, "172.31.252.7": true} {
		if got := isRemote(netip.MustParseAddr(a)); got != want {
			t.Errorf("isRemote(%s) = %v, want %v", a, got, want)
		}
	}
}
