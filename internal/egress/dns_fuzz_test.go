package egress

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/warrenhq/warren/internal/sandbox"
)

// FuzzResolve feeds the DNS forwarder a sandbox's query and the upstream
// resolver's reply, both as they come off the wire. Whatever they hold,
// the forwarder asks upstream nothing about a name the sandbox may not
// resolve, answers with the upstream's reply or its own to the query's
// ID, and opens addresses for allowed names only, each for a name the
// sandbox asked about.
func FuzzResolve(f *testing.F) {
	sandboxIP := netip.MustParseAddr("172.30.0.2")
	query := func(id uint16, names ...string) []byte {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
		b.StartQuestions()
		for _, n := range names {
			b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(n), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
		}
		m, _ := b.Finish()
		return m
	}
	reply := func(id uint16, name string, a [4]byte) []byte {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, Response: true, RecursionAvailable: true})
		b.StartQuestions()
		q := dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}
		b.Question(q)
		b.StartAnswers()
		b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: a})
		m, _ := b.Finish()
		return m
	}
	f.Add(query(1, "allowed.test."), reply(1, "allowed.test.", [4]byte{192, 0, 2, 7}))
	f.Add(query(2, "a.wild.test."), reply(2, "a.wild.test.", [4]byte{192, 0, 2, 8}))
	f.Add(query(3, "denied.test."), reply(3, "denied.test.", [4]byte{192, 0, 2, 9}))
	f.Add(query(4, "ALLOWED.test."), []byte{0, 4, 0x81})
	f.Add([]byte{0, 5}, []byte{})
	f.Fuzz(func(t *testing.T, q, r []byte) {
		rules := sandbox.Network{DenyOut: []string{"0.0.0.0/0"}, AllowOut: []string{"allowed.test", "*.wild.test"}}
		var asked []dnsmessage.Question
		srv, err := New(Config{
			Policy: func(src netip.Addr) (Sandbox, bool) {
				return Sandbox{ID: "sb", TeamID: "t", Network: rules}, src == sandboxIP
			},
			Upstream: []string{"192.0.2.53:53"},
			exchange: func(_, _ string, msg []byte, id uint16) ([]byte, error) {
				var p dnsmessage.Parser
				if _, err := p.Start(msg); err != nil {
					t.Fatalf("forwarded a message that does not parse: %v", err)
				}
				qs, err := p.AllQuestions()
				if err != nil {
					t.Fatalf("forwarded questions that do not parse: %v", err)
				}
				asked = append(asked, qs...)
				out := bytes.Clone(r)
				if len(out) >= 2 {
					out[0], out[1] = byte(id>>8), byte(id)
				}
				return out, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		out := srv.resolve(sandboxIP, q, "udp")
		for _, aq := range asked {
			if name := strings.TrimSuffix(aq.Name.String(), "."); !rules.AllowedDomain(name) {
				t.Fatalf("the upstream was asked about %q, which the sandbox may not resolve", name)
			}
		}
		if out != nil && (len(asked) == 0 || !bytes.Equal(out[min(2, len(out)):], r[min(2, len(r)):])) {
			var p dnsmessage.Parser
			h, err := p.Start(out)
			if err != nil || !h.Response || len(q) < 2 || h.ID != uint16(q[0])<<8|uint16(q[1]) {
				t.Fatalf("answer of its own %x does not answer the query %x: %+v, %v", out, q, h, err)
			}
		}
		for addr, names := range srv.answers.by[sandboxIP] {
			for name := range names {
				if !rules.AllowedDomain(name) {
					t.Fatalf("%v opened for %q, which is not allowed", addr, name)
				}
				found := false
				for _, aq := range asked {
					found = found || strings.EqualFold(strings.TrimSuffix(aq.Name.String(), "."), name)
				}
				if !found {
					t.Fatalf("%v opened for %q, which the sandbox did not ask about", addr, name)
				}
			}
		}
	})
}

// FuzzTCPMessage reads DNS-over-TCP framing as a sandbox sends it: a
// message read is the one its length announced, and writes back the same.
func FuzzTCPMessage(f *testing.F) {
	f.Add([]byte{0, 3, 'a', 'b', 'c'})
	f.Add([]byte{0xff, 0xff, 1})
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, in []byte) {
		msg, err := readTCPMessage(bytes.NewReader(in))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := writeTCPMessage(&out, msg); err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(in, out.Bytes()) {
			t.Fatalf("read %x from %x, which writes back as %x", msg, in, out.Bytes())
		}
	})
}
