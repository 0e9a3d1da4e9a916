package egress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/tlsca"
)

// serveGateway decides one redirected connection: refused (reset),
// intercepted when it goes to a host with rules, relayed as it is
// otherwise, to where it was going, directly or through the sandbox's
// egress proxy.
func (s *Server) serveGateway(c net.Conn) {
	defer c.Close()
	src := source(c.RemoteAddr())
	dst, err := s.cfg.originalDst(c)
	if err != nil {
		s.log.Warn("cannot tell where a redirected connection was going", logkey.SandboxIP, src, "err", err)
		reset(c)
		return
	}
	sb, ok := s.cfg.Policy(src)
	if !ok {
		reset(c)
		return
	}
	byName, why := s.addrVerdict(sb, dst)
	if why != "" {
		s.log.Debug("connection refused", logkey.SandboxIP, src, "to", dst, "reason", why)
		reset(c)
		return
	}
	var seen bytes.Buffer
	var name string
	if byName || len(sb.Network.Rules) > 0 {
		wait := peekTimeout
		if !byName {
			wait = speakFirst
		}
		_ = c.SetReadDeadline(time.Now().Add(wait))
		name, err = sniff(io.TeeReader(c, &seen))
		_ = c.SetReadDeadline(time.Time{})
		if byName && err != nil {
			s.log.Debug("connection refused", logkey.SandboxIP, src, "to", dst, "reason", err)
			reset(c)
			return
		}
		if byName {
			if why := s.refusal(src, dst, sb.Network, name); why != "" {
				s.log.Debug("connection refused", logkey.SandboxIP, src, "to", dst, "name", name, "reason", why)
				reset(c)
				return
			}
		}
	}
	isTLS := seen.Len() > 0 && seen.Bytes()[0] == tlsHandshake
	if key, _ := s.connRules(src, sb, dst, name, isTLS); key != "" {
		if isTLS && s.authority(sb) == nil {
			s.log.Warn("refused a TLS connection to a host with rules: no CA to intercept it with", logkey.SandboxIP, src, "to", dst, "name", name)
			reset(c)
			return
		}
		s.intercept(c, seen.Bytes(), interception{src: src, dst: dst, name: name, tls: isTLS})
		return
	}
	up, err := s.dialUpstream(context.Background(), sb, dst)
	if err != nil {
		s.log.Debug("cannot connect", logkey.SandboxIP, src, "to", dst, "name", name, "err", err)
		reset(c)
		return
	}
	defer up.Close()
	if !s.track(up) {
		return
	}
	defer s.untrack(up)
	if _, err := up.Write(seen.Bytes()); err != nil {
		return
	}
	relay(c, up)
}

// authority is what intercepts sb's TLS: its own, else the server's.
func (s *Server) authority(sb Sandbox) *tlsca.Authority {
	if sb.Authority != nil {
		return sb.Authority
	}
	return s.cfg.Authority
}

// addrVerdict says whether a connection to dst is refused (why != ""),
// may go only for an allowed name (byName), or may go by its address as
// the firewall would let it: an address allowOut/denyOut/internet access
// allows, or a neighbour sandbox of the same team that allowOut names.
func (s *Server) addrVerdict(sb Sandbox, dst netip.AddrPort) (byName bool, why string) {
	a := dst.Addr().Unmap()
	switch {
	case dst.Port() == sandbox.AgentPort:
		return false, "another sandbox's agent port"
	case s.isShut(a):
		if to, ok := s.cfg.Policy(a); ok && sb.TeamID != "" && to.TeamID == sb.TeamID && to.ID != sb.ID && sb.Network.NamesHost(a) {
			return false, ""
		}
		return false, "an address on the sandbox network (or another of the server's): only a sandbox of the same team that allowOut names is reachable there"
	case !s.cfg.remote(a):
		return false, "not a remote unicast address"
	case sb.Network.AllowsAddr(a):
		return false, ""
	}
	return true, ""
}

// connRules returns the key and rules that apply to a connection to dst
// naming name, or "" when none does. Over TLS a name's rules apply (the
// gateway's own connection verifies the host has that name); over plain
// HTTP only where the sandbox's DNS, through the forwarder, led that name
// to dst: nothing proves else that the host is the named one, and the
// headers would go to whatever address the sandbox claims it for. Rules
// of an address or CIDR apply to it whatever the name.
func (s *Server) connRules(src netip.Addr, sb Sandbox, dst netip.AddrPort, name string, isTLS bool) (string, []sandbox.NetworkRule) {
	key, rs := ruleSet(sb.Network.Rules, name, dst.Addr())
	if key == "" {
		return "", nil
	}
	if _, err := sandbox.ParseEgressTarget(key); err != nil && !isTLS && !s.answers.has(src, dst.Addr().Unmap(), normalName(name)) {
		// Keyed by a name the DNS did not lead here: the address rules
		// still may apply.
		return ruleSet(addrRules(sb.Network.Rules), "", dst.Addr())
	}
	return key, rs
}

// addrRules is the subset of rules keyed by an address or a CIDR.
func addrRules(rules map[string][]sandbox.NetworkRule) map[string][]sandbox.NetworkRule {
	out := map[string][]sandbox.NetworkRule{}
	for k, v := range rules {
		if _, err := sandbox.ParseEgressTarget(k); err == nil {
			out[k] = v
		}
	}
	return out
}

// dialUpstream connects to dst for a sandbox: through its egress proxy
// when it has one (and never directly then), directly otherwise.
func (s *Server) dialUpstream(ctx context.Context, sb Sandbox, dst netip.AddrPort) (net.Conn, error) {
	if px := sb.Network.EgressProxy; px != nil {
		addr := px.Address
		if s.cfg.PublicProxiesOnly {
			var err error
			if addr, err = s.publicProxy(ctx, px.Address); err != nil {
				return nil, err
			}
		}
		return dialSOCKS5(ctx, addr, px.Username, px.Password, dst)
	}
	d := net.Dialer{Timeout: dialTimeout}
	return d.DialContext(ctx, "tcp", dst.String())
}

// refusal says why a connection from src to dst naming name may not go
// through, or "" when it may.
func (s *Server) refusal(src netip.Addr, dst netip.AddrPort, rules sandbox.Network, name string) string {
	a := dst.Addr().Unmap()
	switch {
	case !rules.AllowedDomain(name):
		return "name not in allowOut"
	case !s.answers.has(src, a, name):
		return "address not resolved for that name through the sandbox's DNS"
	}
	return ""
}

// isShut reports whether a is in one of the networks Listen was told the
// gateway never connects into.
func (s *Server) isShut(a netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.shut {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// isRemote reports whether a is a unicast address of another host: not
// link-local (cloud metadata), not loopback, not one of this host's, and
// not on the network of one of this host's bridges. Containers live behind
// bridges (other Warren servers' sandboxes, the engine's other networks):
// the gateway connects from the host, which reaches them all, where the
// sandbox itself reaches none.
func isRemote(a netip.Addr) bool {
	if !a.IsGlobalUnicast() || a.IsLinkLocalUnicast() {
		return false
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return false // cannot tell: refuse
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			return false
		}
		_, err = os.Stat(filepath.Join("/sys/class/net", ifc.Name, "bridge"))
		bridge := err == nil
		for _, ia := range addrs {
			n, ok := ia.(*net.IPNet)
			if !ok {
				continue
			}
			la, ok := netip.AddrFromSlice(n.IP)
			ones, _ := n.Mask.Size()
			switch {
			case !ok:
			case la.Unmap() == a:
				return false
			case bridge && netip.PrefixFrom(la.Unmap(), ones).Masked().Contains(a):
				return false
			}
		}
	}
	return true
}

// reset closes c with a TCP reset, so that the client fails at once, as
// with a rejected connection, rather than seeing an orderly end.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}

// relay copies both ways until both directions have ended, passing each
// end of stream on as a half close.
func relay(a, b net.Conn) {
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Add(2)
	go pipe(a, b)
	go pipe(b, a)
	wg.Wait()
}

// originalDst reads where a connection redirected by iptables' REDIRECT
// was going (SO_ORIGINAL_DST, IPv4).
func originalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, net.InvalidAddrError("not a TCP connection")
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var mreq *unix.IPv6Mreq
	var serr error
	if err := raw.Control(func(fd uintptr) {
		// The kernel writes a sockaddr_in; IPv6Mreq is a 20-byte buffer
		// x/sys/unix can read it into.
		mreq, serr = unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, unix.SO_ORIGINAL_DST)
	}); err != nil {
		return netip.AddrPort{}, err
	}
	if serr != nil {
		return netip.AddrPort{}, serr
	}
	b := mreq.Multiaddr
	port := uint16(b[2])<<8 | uint16(b[3])
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), port), nil
}

// publicProxy resolves a proxy's host:port and returns it with the first
// address, which must be public (PublicProxy); the dial then goes to
// that address, so a second resolution cannot change it.
func (s *Server) publicProxy(ctx context.Context, hostport string) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", err
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return "", fmt.Errorf("egress proxy %s: %w", hostport, err)
	}
	for _, a := range addrs {
		if !s.cfg.remote(a.Unmap()) || a.IsPrivate() {
			return "", fmt.Errorf("egress proxy %s is at %s, and this server takes only proxies at public addresses", hostport, a)
		}
	}
	return net.JoinHostPort(addrs[0].Unmap().String(), port), nil
}

// PublicProxy reports whether an egress proxy's address, when it is an IP
// literal, is public: not private, loopback, link-local or one of this
// host's. A host name is checked when it is dialled.
func PublicProxy(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return true
	}
	return isRemote(a.Unmap()) && !a.IsPrivate()
}
