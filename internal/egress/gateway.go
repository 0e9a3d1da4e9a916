package egress

import (
	"bytes"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/sandbox"
)

// serveGateway decides one redirected connection: relayed to where it was
// going when it names an allowed name the sandbox resolved to that
// address, reset otherwise.
func (s *Server) serveGateway(c net.Conn) {
	defer c.Close()
	src := source(c.RemoteAddr())
	dst, err := s.cfg.originalDst(c)
	if err != nil {
		s.log.Warn("egress: cannot tell where a redirected connection was going", "sandbox", src, "err", err)
		reset(c)
		return
	}
	rules, ok := s.cfg.Policy(src)
	if !ok {
		reset(c)
		return
	}
	var seen bytes.Buffer
	_ = c.SetReadDeadline(time.Now().Add(peekTimeout))
	name, err := sniff(io.TeeReader(c, &seen))
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		s.log.Debug("egress: refused", "sandbox", src, "to", dst, "reason", err)
		reset(c)
		return
	}
	if why := s.refusal(src, dst, rules, name); why != "" {
		s.log.Debug("egress: refused", "sandbox", src, "to", dst, "name", name, "reason", why)
		reset(c)
		return
	}
	up, err := net.DialTimeout("tcp", dst.String(), dialTimeout)
	if err != nil {
		s.log.Debug("egress: cannot connect", "sandbox", src, "to", dst, "name", name, "err", err)
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

// refusal says why a connection from src to dst naming name may not go
// through, or "" when it may.
func (s *Server) refusal(src netip.Addr, dst netip.AddrPort, rules sandbox.Network, name string) string {
	a := dst.Addr().Unmap()
	switch {
	case dst.Port() == sandbox.AgentPort:
		return "another sandbox's agent port"
	case s.isShut(a):
		return "an address on the sandbox network (or another of the server's), which no name opens"
	case !s.cfg.remote(a):
		return "not a remote unicast address"
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
