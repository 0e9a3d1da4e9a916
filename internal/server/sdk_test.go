package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/httpguard"
)

func TestListenSDK(t *testing.T) {
	cfg := Config{TLSAddr: "127.0.0.1:0", DNSAddr: "127.0.0.1:0", Domain: "warren.test", StateDir: t.TempDir()}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "host="+r.Host) })
	l, err := listenSDK(t.Context(), cfg, httpguard.New(httpguard.Config{}), h, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	// DNS: a sandbox host resolves to 127.0.0.1 through the built-in server.
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", l.dnsAddr)
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	addrs, err := res.LookupIP(ctx, "ip4", "8000-abc.warren.test")
	if err != nil || len(addrs) != 1 || !addrs[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Fatalf("lookup: %v, %v; want 127.0.0.1", addrs, err)
	}

	// HTTPS: the certificate of Warren's CA is valid for the sandbox host.
	pem, err := os.ReadFile(l.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", l.tlsAddr)
		},
	}}
	resp, err := hc.Get("https://8000-abc.warren.test:3443/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "host=8000-abc.warren.test:3443" {
		t.Errorf("body %q", body)
	}

	var hello bytes.Buffer
	l.printHello(&hello, cfg.Domain)
	for _, want := range []string{"NODE_EXTRA_CA_CERTS=" + l.caFile, "E2B_DOMAIN=warren.test:", "server=/warren.test/127.0.0.1#"} {
		if !strings.Contains(hello.String(), want) {
			t.Errorf("hello lacks %q:\n%s", want, hello.String())
		}
	}
}

func TestListenSDKNeedsTwoLabels(t *testing.T) {
	cfg := Config{TLSAddr: "127.0.0.1:0", Domain: "localhost", StateDir: t.TempDir()}
	_, err := listenSDK(t.Context(), cfg, httpguard.New(httpguard.Config{}), http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "--tls-addr") {
		t.Fatalf("listenSDK with domain localhost: %v, want a --tls-addr error", err)
	}
}
