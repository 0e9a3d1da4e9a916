package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/warrenhq/warren/internal/logkey"
)

// DNS is a tiny authoritative DNS responder for the sandbox domain: it
// answers A and AAAA queries for the domain and every name under it with
// 127.0.0.1 and ::1, so <port>-<id>.<domain> URLs resolve to this machine
// without editing /etc/hosts (point a resolver's stub zone at it). Other
// names are REFUSED: it is not a recursive resolver.
type DNS struct {
	domain string // lowercase, without trailing dot
	log    *slog.Logger
}

// NewDNS returns a responder for domain (a port in it is ignored).
func NewDNS(domain string, log *slog.Logger) *DNS {
	return &DNS{domain: hostname(domain), log: logkey.For(log, "proxy")}
}

// Serve answers queries arriving on pc until ctx ends, then closes pc.
func (d *DNS) Serve(ctx context.Context, pc net.PacketConn) error {
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return ctx.Err()
			}
			return err
		}
		reply, ok := d.answer(buf[:n])
		if !ok {
			continue
		}
		if _, err := pc.WriteTo(reply, from); err != nil {
			d.log.Debug("dns reply failed", "to", from, "err", err)
		}
	}
}

// answer builds the reply to one query message; ok is false for what
// deserves no reply (garbage, responses).
func (d *DNS) answer(msg []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	mine := name == d.domain || strings.HasSuffix(name, "."+d.domain)
	switch {
	case h.OpCode != 0:
		rh.RCode = dnsmessage.RCodeNotImplemented
	case !mine:
		rh.RCode = dnsmessage.RCodeRefused
	default:
		rh.Authoritative = true
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	if rh.RCode == dnsmessage.RCodeSuccess && q.Class == dnsmessage.ClassINET {
		res := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}
		switch q.Type {
		case dnsmessage.TypeA:
			err = b.AResource(res, dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}})
		case dnsmessage.TypeAAAA:
			err = b.AAAAResource(res, dnsmessage.AAAAResource{AAAA: [16]byte{15: 1}})
		}
		if err != nil {
			return nil, false
		}
	}
	out, err := b.Finish()
	return out, err == nil
}
