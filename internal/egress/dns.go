package egress

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/warrenhq/warren/internal/logkey"
)

// maxInflight bounds the UDP queries being forwarded at once.
const maxInflight = 256

// serveDNS answers the queries arriving on pc until it is closed.
func (s *Server) serveDNS(pc net.PacketConn) {
	slots := make(chan struct{}, maxInflight)
	for {
		buf := make([]byte, 64<<10)
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Error("dns read failed", "err", err)
			}
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			continue // overloaded: the client retries
		}
		go func() {
			defer func() { <-slots }()
			if reply := s.resolve(source(from), buf[:n], "udp"); reply != nil {
				_, _ = pc.WriteTo(reply, from)
			}
		}()
	}
}

// serveDNSConn answers the length-prefixed queries of one TCP connection.
func (s *Server) serveDNSConn(c net.Conn) {
	defer c.Close()
	src := source(c.RemoteAddr())
	for {
		_ = c.SetDeadline(time.Now().Add(peekTimeout))
		msg, err := readTCPMessage(c)
		if err != nil {
			return
		}
		reply := s.resolve(src, msg, "tcp")
		if reply == nil {
			return
		}
		if err := writeTCPMessage(c, reply); err != nil {
			return
		}
	}
}

// resolve answers one query from src: forwarded upstream when src may
// resolve the name, REFUSED when not, nil when msg deserves no answer.
// Only a standard query of one question is forwarded: the name checked is
// the name asked, and the answers remembered answer it alone.
func (s *Server) resolve(src netip.Addr, msg []byte, network string) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	if _, err := p.Question(); !errors.Is(err, dnsmessage.ErrSectionDone) {
		return answerOnly(h, q, dnsmessage.RCodeFormatError)
	}
	if h.OpCode != 0 {
		return answerOnly(h, q, dnsmessage.RCodeNotImplemented)
	}
	sb, ok := s.cfg.Policy(src)
	rules := sb.Network
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	allowed := ok && rules.AllowedDomain(name)
	if !ok || !allowed && !s.mayResolve(sb) {
		s.log.Debug("dns refused", logkey.SandboxIP, src, "name", name)
		return refused(h, q)
	}
	reply, upstream, err := s.forward(sb, msg, h.ID, network)
	if err != nil {
		s.log.Warn("no resolver answered", logkey.SandboxIP, src, "name", name, "upstream", upstream, "err", err)
		return failed(h, q)
	}
	// What a name with header rules resolved to is remembered too: plain
	// HTTP gets the rules only where the name led (see ruleSet).
	if allowed || hasNameRule(rules.Rules, name) {
		s.remember(src, name, reply)
	}
	return reply
}

// mayResolve reports whether rules let the sandbox reach every upstream
// resolver directly, so that answering any name gives it nothing new.
func (s *Server) mayResolve(sb Sandbox) bool {
	for _, up := range s.upstreamsOf(sb) {
		ap, err := netip.ParseAddrPort(up)
		if err != nil || !sb.Network.AllowsAddr(ap.Addr()) {
			return false
		}
	}
	return true
}

// forward asks the upstream resolvers in turn; it returns the first reply
// to msg and the last resolver asked.
func (s *Server) forward(sb Sandbox, msg []byte, id uint16, network string) (reply []byte, upstream string, err error) {
	for _, upstream = range s.upstreamsOf(sb) {
		reply, err = s.cfg.exchange(network, upstream, msg, id)
		if err == nil {
			return reply, upstream, nil
		}
	}
	return nil, upstream, err
}

// exchange sends msg to one resolver and reads its reply.
func exchange(network, upstream string, msg []byte, id uint16) ([]byte, error) {
	c, err := net.DialTimeout(network, upstream, queryTimeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(queryTimeout))
	if network == "tcp" {
		if err := writeTCPMessage(c, msg); err != nil {
			return nil, err
		}
		return readTCPMessage(c)
	}
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		if n >= 2 && binary.BigEndian.Uint16(buf) == id {
			return buf[:n], nil
		}
	}
}

// remember records the addresses in reply as given to src for name. The
// records answer for the end of a CNAME chain, but the sandbox connects
// with the name it asked for, so they count for that name.
func (s *Server) remember(src netip.Addr, name string, reply []byte) {
	var p dnsmessage.Parser
	if _, err := p.Start(reply); err != nil {
		return
	}
	if err := p.SkipAllQuestions(); err != nil {
		return
	}
	for {
		h, err := p.AnswerHeader()
		if err != nil {
			return
		}
		ttl := time.Duration(h.TTL) * time.Second
		switch h.Type {
		case dnsmessage.TypeA:
			r, err := p.AResource()
			if err != nil {
				return
			}
			s.answers.add(src, netip.AddrFrom4(r.A), name, ttl)
		case dnsmessage.TypeAAAA:
			r, err := p.AAAAResource()
			if err != nil {
				return
			}
			s.answers.add(src, netip.AddrFrom16(r.AAAA).Unmap(), name, ttl)
		default:
			if err := p.SkipAnswer(); err != nil {
				return
			}
		}
	}
}

// refused and failed build the REFUSED and SERVFAIL answers to a query.
func refused(h dnsmessage.Header, q dnsmessage.Question) []byte {
	return answerOnly(h, q, dnsmessage.RCodeRefused)
}

func failed(h dnsmessage.Header, q dnsmessage.Question) []byte {
	return answerOnly(h, q, dnsmessage.RCodeServerFailure)
}

func answerOnly(h dnsmessage.Header, q dnsmessage.Question, rcode dnsmessage.RCode) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), dnsmessage.Header{
		ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired, RecursionAvailable: true, RCode: rcode,
	})
	if b.StartQuestions() != nil || b.Question(q) != nil {
		return nil
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// readTCPMessage and writeTCPMessage frame DNS over TCP: a 2-byte length,
// then the message.
func readTCPMessage(r io.Reader) ([]byte, error) {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	msg := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	return msg, nil
}

func writeTCPMessage(w io.Writer, msg []byte) error {
	if len(msg) > 0xffff {
		return errors.New("dns message too long")
	}
	out := make([]byte, 2+len(msg))
	binary.BigEndian.PutUint16(out, uint16(len(msg)))
	copy(out[2:], msg)
	_, err := w.Write(out)
	return err
}
