package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// BenchmarkHTTPS is what interception costs one HTTPS request, on
// loopback and in-process (no iptables, no bridge): direct to the host,
// relayed by the gateway, and intercepted (TLS terminated, a header set,
// the gateway's own TLS to the host), each on a kept-alive connection
// and on a new one. The added latency is intercepted minus direct.
//
//	go test -run - -bench HTTPS ./internal/egress
func BenchmarkHTTPS(b *testing.B) {
	backend, backendRoots, configure, caRoots := tlsSetup(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	dst := strings.TrimPrefix(backend.URL, "https://")

	for _, c := range []struct {
		name  string
		rules string // the host with rules
		roots *x509.CertPool
		via   bool // through the gateway
	}{
		{"direct", "", backendRoots, false},
		{"relayed", "elsewhere.test", backendRoots, true},
		{"intercepted", "example.com", caRoots, true},
	} {
		for _, keep := range []bool{true, false} {
			name := c.name + "/new-connection"
			if keep {
				name = c.name + "/keep-alive"
			}
			b.Run(name, func(b *testing.B) {
				e := newConfigEnv(b, nil, withRules(openNet, c.rules, map[string]string{"Authorization": "${e2b.secrets.TOKEN}"}), nil, configure)
				e.goingTo(dst)
				addr := dst
				if c.via {
					addr = netip.AddrPortFrom(loopback, e.ports.Gateway).String()
				}
				tr := &http.Transport{
					DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
						return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
					},
					TLSClientConfig:   &tls.Config{RootCAs: c.roots, ServerName: "example.com"},
					DisableKeepAlives: !keep,
					TLSNextProto:      map[string]func(string, *tls.Conn) http.RoundTripper{},
				}
				defer tr.CloseIdleConnections()
				client := &http.Client{Transport: tr}
				b.ResetTimer()
				for b.Loop() {
					resp, err := client.Get("https://example.com/")
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Fatalf("status %d", resp.StatusCode)
					}
				}
			})
		}
	}
}
