package egress

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

// socksServer is a SOCKS5 proxy on loopback taking CONNECT with the
// username/password user:pass (or none when user is ""), recording what
// each client asked for.
type socksServer struct {
	l          net.Listener
	user, pass string

	mu       sync.Mutex
	connects []string // "user:pass@dst"
}

func newSOCKSServer(t *testing.T, user, pass string) *socksServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &socksServer{l: l, user: user, pass: pass}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *socksServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.connects...)
}

func (s *socksServer) serve(c net.Conn) {
	defer c.Close()
	var head [2]byte
	if _, err := io.ReadFull(c, head[:]); err != nil || head[0] != 5 {
		return
	}
	methods := make([]byte, head[1])
	io.ReadFull(c, methods)
	want := byte(0)
	if s.user != "" {
		want = 2
	}
	if !bytes.Contains(methods, []byte{want}) {
		c.Write([]byte{5, 0xff})
		return
	}
	c.Write([]byte{5, want})
	var user, pass string
	if want == 2 {
		var v [2]byte
		io.ReadFull(c, v[:])
		u := make([]byte, v[1])
		io.ReadFull(c, u)
		var pl [1]byte
		io.ReadFull(c, pl[:])
		p := make([]byte, pl[0])
		io.ReadFull(c, p)
		user, pass = string(u), string(p)
		if user != s.user || pass != s.pass {
			c.Write([]byte{1, 1})
			return
		}
		c.Write([]byte{1, 0})
	}
	var req [4]byte
	if _, err := io.ReadFull(c, req[:]); err != nil || req[1] != 1 || req[3] != 1 {
		c.Write([]byte{5, 7, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	var addr [6]byte
	io.ReadFull(c, addr[:])
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte(addr[:4])), binary.BigEndian.Uint16(addr[4:]))
	s.mu.Lock()
	s.connects = append(s.connects, fmt.Sprintf("%s:%s@%s", user, pass, dst))
	s.mu.Unlock()
	up, err := net.Dial("tcp", dst.String())
	if err != nil {
		c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	defer up.Close()
	c.Write([]byte{5, 0, 0, 1, 127, 0, 0, 1, 0, 0})
	relay(c, up)
}

func proxied(n sandbox.Network, addr, user, pass string) sandbox.Network {
	n.EgressProxy = &sandbox.EgressProxy{Address: addr, Username: user, Password: pass}
	return n
}

func TestEgressProxy(t *testing.T) {
	b := &echo{}
	backend := httptest.NewServer(b)
	defer backend.Close()
	dst := strings.TrimPrefix(backend.URL, "http://")
	px := newSOCKSServer(t, "alice", "pw")
	configure, _ := interceptor(t, nil)
	e := newConfigEnv(t, nil, proxied(openNet, px.l.Addr().String(), "alice", "pw"), nil, configure)
	e.goingTo(dst)

	// Relayed, and intercepted, both through the proxy.
	if got := e.send(t, "any.test"); !strings.HasPrefix(got[0], `200 auth="mine"`) {
		t.Fatalf("relayed through the proxy: %v", got)
	}
	n := proxied(withRules(openNet, "127.0.0.1", map[string]string{"Authorization": "${e2b.secrets.TOKEN}"}), px.l.Addr().String(), "alice", "pw")
	e.setRules(n)
	if got := e.send(t, "127.0.0.1"); !strings.HasPrefix(got[0], `200 auth="s3cret"`) {
		t.Fatalf("intercepted through the proxy: %v", got)
	}
	if got := px.seen(); len(got) != 2 || got[0] != "alice:pw@"+dst || got[1] != got[0] {
		t.Errorf("the proxy saw %v", got)
	}

	// Fail closed: wrong credentials, a proxy that is not SOCKS5, a proxy
	// that is down. Nothing reaches the backend directly.
	hits := b.hits.Load()
	// A server that speaks first, and no SOCKS.
	banner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer banner.Close()
	go func() {
		for {
			c, err := banner.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "SSH-2.0-OpenSSH_9.2\r\n")
			c.Close()
		}
	}()
	down, _ := net.Listen("tcp", "127.0.0.1:0")
	downAddr := down.Addr().String()
	down.Close()
	for what, n := range map[string]sandbox.Network{
		"wrong password":    proxied(openNet, px.l.Addr().String(), "alice", "nope"),
		"no credentials":    proxied(openNet, px.l.Addr().String(), "", ""),
		"not a SOCKS proxy": proxied(openNet, banner.Addr().String(), "", ""),
		"proxy down":        proxied(openNet, downAddr, "", ""),
	} {
		e.setRules(n)
		if got := e.send(t, "any.test"); !strings.HasPrefix(got[0], "error:") {
			t.Errorf("%s: relayed: %v", what, got)
		}
		e.setRules(proxied(withRules(openNet, "127.0.0.1", map[string]string{"A": "b"}), n.EgressProxy.Address, n.EgressProxy.Username, n.EgressProxy.Password))
		if got := e.send(t, "127.0.0.1"); !strings.HasPrefix(got[0], "502 ") {
			t.Errorf("%s: intercepted: %v", what, got)
		}
	}
	if b.hits.Load() != hits {
		t.Errorf("the backend got requests past a failed proxy")
	}
}

// FuzzSOCKSHandshake feeds the client anything as the proxy's side: it
// errs or succeeds, never panics or hangs.
func FuzzSOCKSHandshake(f *testing.F) {
	f.Add([]byte{5, 0, 5, 0, 0, 1, 127, 0, 0, 1, 0, 80}, false)
	f.Add([]byte{5, 2, 1, 0, 5, 0, 0, 3, 4, 'a', 'b', 'c', 'd', 0, 80}, true)
	f.Add([]byte{5, 2, 1, 1}, true)
	f.Add([]byte{5, 0xff}, false)
	f.Add([]byte{5, 0, 5, 4, 0, 4}, false)
	f.Add([]byte{5, 0, 5, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 187}, false)
	f.Fuzz(func(t *testing.T, proxy []byte, creds bool) {
		user, pass := "", ""
		if creds {
			user, pass = "u", "p"
		}
		rw := struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(proxy), io.Discard}
		_ = socksHandshake(rw, user, pass, netip.MustParseAddrPort("192.0.2.1:443"))
	})
}

func TestSOCKSHandshakeErrors(t *testing.T) {
	for _, c := range []struct {
		proxy []byte
		creds bool
		want  string
	}{
		{[]byte{4, 0}, false, "not a SOCKS5 proxy"},
		{[]byte{5, 0xff}, false, "wants credentials"},
		{[]byte{5, 0xff}, true, "does not take a username"},
		{[]byte{5, 0}, true, "was not offered"},
		{[]byte{5, 2, 1, 1}, true, "refused the username"},
		{[]byte{5, 0, 5, 5, 0, 1}, false, "connection refused"},
		{[]byte{5, 0, 5, 0, 0, 9}, false, "address type 9"},
		{[]byte{5, 0, 5, 0, 0, 1, 1, 2}, false, "truncated"},
		{[]byte{5, 0, 5, 0, 0, 1, 1, 2, 3, 4, 0, 80}, false, ""},
	} {
		user, pass := "", ""
		if c.creds {
			user, pass = "u", "p"
		}
		rw := struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(c.proxy), io.Discard}
		err := socksHandshake(rw, user, pass, netip.MustParseAddrPort("192.0.2.1:443"))
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("proxy %v: %v, want %q", c.proxy, err, c.want)
		}
	}
}

// TestPublicProxiesOnly: a server that takes only public proxies refuses
// one that resolves to a private address at dial time, and PublicProxy
// refuses private IP literals up front.
func TestPublicProxiesOnly(t *testing.T) {
	backend := httptest.NewServer(&echo{})
	defer backend.Close()
	e := newConfigEnv(t, nil, proxied(openNet, "10.0.0.1:1080", "", ""), nil, func(c *Config) { c.PublicProxiesOnly = true })
	e.goingTo(strings.TrimPrefix(backend.URL, "http://"))
	if got := e.send(t, "any.test"); !strings.HasPrefix(got[0], "error:") {
		t.Errorf("a private proxy was used: %v", got)
	}
	for addr, want := range map[string]bool{
		"127.0.0.1:1080": false, "10.1.2.3:1080": false, "[fd00::1]:1080": false, "169.254.1.1:1080": false,
		"192.0.2.1:1080": true, "proxy.example.com:1080": true, "no-port": false,
	} {
		if got := PublicProxy(addr); got != want {
			t.Errorf("PublicProxy(%q) = %v, want %v", addr, got, want)
		}
	}
}
