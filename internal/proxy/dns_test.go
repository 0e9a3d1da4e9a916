package proxy

import (
	"context"
	"encoding/binary"
	"net"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

func TestDNS(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- NewDNS("Warren.Test:3000", nil).Serve(ctx, pc) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after cancel")
		}
	}()

	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	tests := []struct {
		name string
		want []string // nil = lookup fails
	}{
		{"49983-isbx1.warren.test", []string{"127.0.0.1", "::1"}},
		{"8080-ABC.Warren.Test", []string{"127.0.0.1", "::1"}},
		{"warren.test", []string{"127.0.0.1", "::1"}},
		{"example.com", nil},
		{"notwarren.test", nil},
	}
	for _, tc := range tests {
		lctx, lcancel := context.WithTimeout(ctx, 3*time.Second)
		addrs, err := r.LookupHost(lctx, tc.name)
		lcancel()
		slices.Sort(addrs)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s resolved to %v, want a failure", tc.name, addrs)
			}
			continue
		}
		if err != nil || !slices.Equal(addrs, tc.want) {
			t.Errorf("%s = %v, %v; want %v", tc.name, addrs, err, tc.want)
		}
	}
}

// FuzzDNSAnswer feeds the responder arbitrary packets, as anyone who can
// reach its port may send: no panic, and every reply parses, answers the
// query's ID and holds no more than one record.
func FuzzDNSAnswer(f *testing.F) {
	for _, name := range []string{"49983-isbx1.warren.test.", "example.com.", "warren.test."} {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
		b.StartQuestions()
		b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
		msg, err := b.Finish()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(msg)
	}
	f.Add([]byte{})
	f.Add([]byte{0, 1, 0x80, 0})
	d := NewDNS("warren.test", nil)
	f.Fuzz(func(t *testing.T, msg []byte) {
		reply, ok := d.answer(msg)
		if !ok {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(reply)
		if err != nil {
			t.Fatalf("reply does not parse: %v", err)
		}
		if !h.Response || h.ID != binary.BigEndian.Uint16(msg) {
			t.Fatalf("reply header %+v for query ID %d", h, binary.BigEndian.Uint16(msg))
		}
		if err := p.SkipAllQuestions(); err != nil {
			t.Fatalf("reply questions: %v", err)
		}
		answers, err := p.AllAnswers()
		if err != nil {
			t.Fatalf("reply answers: %v", err)
		}
		if len(answers) > 1 {
			t.Fatalf("%d answers", len(answers))
		}
	})
}
