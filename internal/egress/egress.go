// Package egress enforces the domain names in sandboxes' allowOut. The
// firewall (internal/firewall) sends it, from a sandbox whose allowOut has
// domains and whose rules deny something, what those rules would
// otherwise refuse or leave unchecked: the sandbox's DNS queries, and its
// TCP connections to denied addresses.
//
// The DNS forwarder answers such a sandbox for the names it may reach (or
// for every name, when its rules let it reach the resolver anyway) and
// remembers which addresses it gave for which allowed name. The gateway
// peeks at the first bytes of a redirected connection: when its TLS server
// name (SNI) or its HTTP Host is an allowed name and the sandbox was given
// the connection's destination for that name, it connects to that
// destination and relays; otherwise it closes the connection. So a name
// opens only the addresses the resolver gave for it, and a sandbox cannot
// reach any other address by claiming an allowed name. No name opens an
// address of the host's or on the network of one of its bridges: the
// sandbox network, the template builds', another server's, the engine's
// others. Sandboxes reach each other only where the firewall lets them,
// by address. Protocols that are
// neither TLS nor HTTP cannot be allowed by name: allow their addresses.
//
// A sandbox with header rules (network.rules) or an egress proxy
// (network.egressProxy) has all its TCP sent here, and the gateway
// enforces its allowOut and denyOut itself (an address is allowed as the
// firewall would allow it, a denied one by name as above, a neighbour
// sandbox only as the firewall opens it). A connection to a host with
// rules is intercepted (intercept.go): plain HTTP is read request by
// request, TLS is terminated with a certificate of Warren's CA for the
// name (tlsca.Authority), which sandboxes trust, and each request is sent
// on over the gateway's own connection (verified TLS for HTTPS) with the
// rules' headers set, their placeholders resolved by Config.Expander at
// send time; one that does not resolve refuses the request. Every other
// connection is relayed byte for byte, never decrypted. With an egress
// proxy, every upstream connection is opened through it (SOCKS5, socks5.go),
// and none goes direct when it fails.
//
// It owns its listeners (on the sandbox bridge's host address, at ports
// the firewall redirects to; on Kubernetes, on a node's address, where the
// node agent's table sends a node's sandbox pods) and the table of
// answers. It does not decide which traffic comes to it, nor install
// rules: the firewall (internal/firewall, internal/nodeagent) does.
package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/tlsca"
)

// Sandbox is what the gateway knows of the sandbox at an address.
type Sandbox struct {
	ID, TeamID string
	Network    sandbox.Network
	// Upstream are the resolvers (host:port) its queries are forwarded
	// to; nil: the server's (Config.Upstream). A node agent serves the
	// sandboxes of several control planes, each with its own.
	Upstream []string
	// Authority, RootCAs and Expander replace the Config's for this
	// sandbox (nil: the Config's), for a node agent whose sandboxes come
	// from several control planes, each with its CA, trusted roots and
	// secrets.
	Authority *tlsca.Authority
	RootCAs   *x509.CertPool
	Expander  Expander
}

// Policy returns the sandbox with address src, and whether src is a
// sandbox at all.
type Policy func(src netip.Addr) (Sandbox, bool)

// Expander resolves the placeholders in a header value of a sandbox's
// rules (${e2b.secrets.NAME}, ${e2b.identity.tokens.NAME}) when a request
// is sent. A value without placeholders comes back as it is; one whose
// placeholder does not resolve is an error, whose message the sandbox's
// client is shown, so it says which placeholder and why but never holds
// a secret.
type Expander interface {
	Expand(ctx context.Context, sandboxID, teamID, value string) (string, error)
}

// Config configures a Server.
type Config struct {
	// Policy tells the sandboxes' rules. Required.
	Policy Policy
	// Upstream lists the resolvers queries are forwarded to, as host:port.
	// Default: the nameservers of /etc/resolv.conf.
	Upstream []string
	// Logger receives the refusals (debug) and failures. Default: discard.
	Logger *slog.Logger
	// Authority signs the certificates of intercepted TLS connections.
	// Without it no TLS is intercepted: a TLS connection to a host with
	// rules is refused, since relaying it would send it without them.
	Authority *tlsca.Authority
	// RootCAs verifies the hosts intercepted TLS goes on to. Default: the
	// system's roots.
	RootCAs *x509.CertPool
	// Expander resolves placeholders in header values. Without it a value
	// with a placeholder fails every request it applies to.
	Expander Expander
	// PublicProxiesOnly refuses egress proxies at private, loopback,
	// link-local or the host's own addresses (see PublicProxy), checked at
	// every dial, as the proxy's name resolves then. Default false: a
	// self-hosted network's proxy is usually private.
	PublicProxiesOnly bool
	// originalDst reads where a redirected connection was going, remote
	// tells the addresses it may go to, and exchange asks one upstream
	// resolver; tests replace them. Default: SO_ORIGINAL_DST, isRemote
	// and exchange.
	originalDst func(net.Conn) (netip.AddrPort, error)
	remote      func(netip.Addr) bool
	exchange    func(network, upstream string, msg []byte, id uint16) ([]byte, error)
}

// Server is the DNS forwarder and the TCP gateway. Its methods are safe
// for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	answers  *answers
	expander atomic.Pointer[Expander] // Config.Expander, or what SetExpander set

	mu     sync.Mutex // guards the fields below
	closed bool
	shut   []netip.Prefix // networks the gateway never connects into; set by Listen
	dnsUDP net.PacketConn
	dnsTCP net.Listener
	gw     net.Listener
	open   map[net.Conn]struct{} // connections being served or relayed
	conns  sync.WaitGroup
}

// Timeouts of one forwarded query, of the first bytes of a redirected
// connection, and of the connection to its destination. speakFirst is how
// long a connection allowed by address, from a sandbox with rules, may
// stay silent before it is relayed without a name: HTTP and TLS clients
// speak first, protocols whose servers do (SMTP, MySQL) wait that long.
const (
	queryTimeout = 3 * time.Second
	peekTimeout  = 10 * time.Second
	dialTimeout  = 10 * time.Second
	speakFirst   = 300 * time.Millisecond
)

// New returns a Server; Listen starts it.
func New(cfg Config) (*Server, error) {
	if cfg.Policy == nil {
		return nil, errors.New("egress: Config.Policy is required")
	}
	if len(cfg.Upstream) == 0 {
		up, err := systemResolvers("/etc/resolv.conf")
		if err != nil {
			return nil, err
		}
		cfg.Upstream = up
	}
	if cfg.originalDst == nil {
		cfg.originalDst = originalDst
	}
	if cfg.remote == nil {
		cfg.remote = isRemote
	}
	if cfg.exchange == nil {
		cfg.exchange = exchange
	}
	s := &Server{cfg: cfg, log: logkey.For(cfg.Logger, "egress"), answers: newAnswers(), open: map[net.Conn]struct{}{}}
	if cfg.Expander != nil {
		s.SetExpander(cfg.Expander)
	}
	return s, nil
}

// upstreamsOf are the resolvers sb's queries are forwarded to.
func (s *Server) upstreamsOf(sb Sandbox) []string {
	if len(sb.Upstream) > 0 {
		return sb.Upstream
	}
	return s.cfg.Upstream
}

// SetExpander replaces the Expander, for a server whose secrets store is
// opened after its firewall; requests sent from then on use it.
func (s *Server) SetExpander(e Expander) { s.expander.Store(&e) }

// Ports are where a Server listens: the firewall redirects DNS (UDP and
// TCP) to DNS and TCP connections to Gateway.
type Ports struct {
	DNS, Gateway uint16
}

// Listen starts serving on addr, the bridge's host address, at ports the
// system picks, and returns them. The gateway never connects to an address
// in shut: the sandbox network's prefix (sandboxes reach each other only by
// an address the firewall lets through, never by a name that resolves to
// one) and the server's other networks, such as the template builds'.
func (s *Server) Listen(addr netip.Addr, shut ...netip.Prefix) (Ports, error) {
	return s.ListenAt(addr, Ports{}, shut...)
}

// ListenAt is Listen at fixed ports (a zero port: one the system picks).
// A node agent listens at the same ports across its restarts, so that the
// rules its last run left in the kernel send sandboxes to a gateway that,
// knowing no sandbox yet, refuses them until it learns their rules.
func (s *Server) ListenAt(addr netip.Addr, want Ports, shut ...netip.Prefix) (Ports, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Ports{}, net.ErrClosed
	}
	if s.gw != nil {
		return Ports{}, errors.New("egress: already listening")
	}
	gw, err := net.Listen("tcp", netip.AddrPortFrom(addr, want.Gateway).String())
	if err != nil {
		return Ports{}, fmt.Errorf("egress: gateway: %w", err)
	}
	// DNS takes one port for UDP and TCP; retry when the TCP side is taken.
	var udp net.PacketConn
	var tcp net.Listener
	for range 10 {
		udp, err = net.ListenPacket("udp", netip.AddrPortFrom(addr, want.DNS).String())
		if err != nil {
			gw.Close()
			return Ports{}, fmt.Errorf("egress: dns: %w", err)
		}
		tcp, err = net.Listen("tcp", udp.LocalAddr().String())
		if err == nil {
			break
		}
		udp.Close()
		if want.DNS != 0 {
			break
		}
	}
	if err != nil {
		gw.Close()
		return Ports{}, fmt.Errorf("egress: dns over tcp: %w", err)
	}
	s.gw, s.dnsUDP, s.dnsTCP = gw, udp, tcp
	for _, p := range shut {
		s.shut = append(s.shut, p.Masked())
	}
	go s.serveDNS(udp)
	go s.acceptLoop(tcp, s.serveDNSConn)
	go s.acceptLoop(gw, s.serveGateway)
	return Ports{
		DNS:     uint16(udp.LocalAddr().(*net.UDPAddr).Port),
		Gateway: uint16(gw.Addr().(*net.TCPAddr).Port),
	}, nil
}

// SetShut replaces the networks the gateway never connects into (see
// Listen), for a node agent that learns them from the control plane.
func (s *Server) SetShut(shut []netip.Prefix) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shut = s.shut[:0:0]
	for _, p := range shut {
		s.shut = append(s.shut, p.Masked())
	}
}

// Forget drops what the forwarder told the sandbox with address src,
// when it goes away: another sandbox may get the address.
func (s *Server) Forget(src netip.Addr) {
	s.answers.forget(src)
}

// Close stops serving, closes the connections being served or relayed
// (a relay may otherwise last as long as the sandbox keeps it open), and
// waits for their goroutines to end.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	var errs []error
	if s.gw != nil {
		errs = append(errs, s.gw.Close(), s.dnsTCP.Close(), s.dnsUDP.Close())
	}
	for c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	s.conns.Wait()
	return errors.Join(errs...)
}

// track registers a connection for Close; false (and c closed) once the
// server is closed.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.open[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open, c)
}

// acceptLoop hands every connection of l to serve until l is closed.
func (s *Server) acceptLoop(l net.Listener, serve func(net.Conn)) {
	for {
		c, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Error("accept failed", "listener", l.Addr(), "err", err)
			}
			return
		}
		if !s.track(c) {
			continue
		}
		s.conns.Add(1)
		go func() {
			defer s.conns.Done()
			defer s.untrack(c)
			serve(c)
		}()
	}
}

// source is the sandbox address a connection or packet comes from.
func source(a net.Addr) netip.Addr {
	switch v := a.(type) {
	case *net.TCPAddr:
		ap := v.AddrPort()
		return ap.Addr().Unmap()
	case *net.UDPAddr:
		ap := v.AddrPort()
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// systemResolvers reads the nameservers of a resolv.conf as host:53.
func systemResolvers(path string) ([]string, error) {
	addrs, err := Nameservers(path)
	if err != nil {
		return nil, fmt.Errorf("egress: no resolver to forward DNS to: %w; set the upstream resolvers (warren serve --egress-dns)", err)
	}
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = netip.AddrPortFrom(a, 53).String()
	}
	return out, nil
}

// Nameservers returns the nameserver addresses a resolv.conf lists; none
// is an error.
func Nameservers(path string) ([]netip.Addr, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err == nil {
				out = append(out, a)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s lists no nameserver", path)
	}
	return out, nil
}
