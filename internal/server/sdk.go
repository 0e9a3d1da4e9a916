package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/httpguard"
	"github.com/warrenhq/warren/internal/proxy"
	"github.com/warrenhq/warren/internal/tlsca"
)

// sdkListeners are the optional listeners that let the SDK use its
// default https://<port>-<id>.<domain> URLs: HTTPS with a certificate
// from Warren's own CA, and a DNS responder for *.<domain>. They serve
// the same handler as the plain HTTP port.
type sdkListeners struct {
	tlsAddr string // bound HTTPS address; "" = off
	dnsAddr string // bound DNS address; "" = off
	caFile  string // the CA certificate clients must trust

	srv    *http.Server // nil when TLS is off
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// listenSDK binds --tls-addr and --dns-addr when set and starts serving
// on them, HTTPS with the same limits as the HTTP port (newHTTPServer)
// and its connections counted with the HTTP port's by guard; Close stops
// both.
func listenSDK(ctx context.Context, cfg Config, guard *httpguard.Guard, h http.Handler, log *slog.Logger) (*sdkListeners, error) {
	ctx, cancel := context.WithCancel(ctx)
	l := &sdkListeners{cancel: cancel}
	if cfg.TLSAddr != "" {
		cert, files, err := tlsca.Ensure(filepath.Join(cfg.StateDir, "tls"), cfg.Domain, time.Now())
		if err != nil {
			cancel()
			return nil, fmt.Errorf("--tls-addr: %w (use a --domain such as warren.test)", err)
		}
		ln, err := net.Listen("tcp", cfg.TLSAddr)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("--tls-addr: %w", err)
		}
		l.tlsAddr, l.caFile = ln.Addr().String(), files.CACert
		ln = guard.Listen(ln) // beneath TLS: the guard's deadlines bound handshakes too
		l.srv = newHTTPServer(cfg, guard, h, log)
		l.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		l.wg.Go(func() {
			if err := l.srv.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
				log.Error("https listener stopped", "err", err)
			}
		})
	}
	if cfg.DNSAddr != "" {
		pc, err := net.ListenPacket("udp", cfg.DNSAddr)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("--dns-addr: %w", err)
		}
		l.dnsAddr = pc.LocalAddr().String()
		dns := proxy.NewDNS(cfg.Domain, log)
		l.wg.Go(func() {
			if err := dns.Serve(ctx, pc); err != nil && ctx.Err() == nil {
				log.Error("dns listener stopped", "err", err)
			}
		})
	}
	return l, nil
}

// Close stops the listeners, cutting open HTTPS streams after a short
// grace, and waits for them.
func (l *sdkListeners) Close() {
	l.cancel()
	if l.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := l.srv.Shutdown(ctx); err != nil {
			l.srv.Close()
		}
		cancel()
	}
	l.wg.Wait()
}

// printHello tells the operator how to use the SDK's default URLs.
func (l *sdkListeners) printHello(w io.Writer, domain string) {
	if l.tlsAddr == "" && l.dnsAddr == "" {
		return
	}
	if l.tlsAddr != "" {
		_, port, _ := net.SplitHostPort(l.tlsAddr)
		sdkDomain := domain
		if port != "443" {
			sdkDomain = domain + ":" + port
		}
		fmt.Fprintf(w, "HTTPS on %s for https://<port>-<id>.%s; trust the CA %s, e.g.\n"+
			"  export NODE_EXTRA_CA_CERTS=%s\n"+
			"and leave E2B_SANDBOX_URL unset, with\n  export E2B_DOMAIN=%s\n",
			l.tlsAddr, domain, l.caFile, l.caFile, sdkDomain)
	}
	if l.dnsAddr != "" {
		host, port, _ := net.SplitHostPort(l.dnsAddr)
		fmt.Fprintf(w, "DNS for *.%s on %s (udp); point the system resolver at it for that domain, e.g.\n"+
			"  dnsmasq: server=/%s/%s#%s\n"+
			"  systemd-resolved (246+): /etc/systemd/resolved.conf.d/warren.conf with\n"+
			"    [Resolve]\n    DNS=%s\n    Domains=~%s\n",
			domain, l.dnsAddr, domain, host, port, l.dnsAddr, domain)
	}
}
