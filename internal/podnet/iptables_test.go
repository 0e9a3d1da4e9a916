package podnet

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// decoded is a table read back from iptReplace's bytes the way the
// kernel reads them: the ipt_replace, then entries chained by their
// next_offset.
type decoded struct {
	input, output, forward []iptRule
	policies               int // unconditional ACCEPTs at the underflows
}

func decode(t *testing.T, b []byte, v6 bool) decoded {
	t.Helper()
	le := binary.NativeEndian
	if len(b) < sizeReplace {
		t.Fatalf("%d bytes: shorter than an ipt_replace", len(b))
	}
	if name := string(bytes.TrimRight(b[:32], "\x00")); name != "filter" {
		t.Fatalf("table %q", name)
	}
	if hooks := le.Uint32(b[32:]); hooks != 0b1110 {
		t.Fatalf("valid hooks %#b: want INPUT, FORWARD, OUTPUT", hooks)
	}
	num, size := le.Uint32(b[36:]), le.Uint32(b[40:])
	entries := b[sizeReplace:]
	if int(size) != len(entries) {
		t.Fatalf("size %d, entries are %d bytes", size, len(entries))
	}
	esize, at := entrySize(v6)
	alen := 4
	if v6 {
		alen = 16
	}
	hookAt := func(h int) uint32 { return le.Uint32(b[44+4*h:]) }
	underflowAt := func(h int) uint32 { return le.Uint32(b[64+4*h:]) }

	var d decoded
	var chain *[]iptRule
	var off uint32
	for i := uint32(0); i < num; i++ {
		if int(off)+esize > len(entries) {
			t.Fatalf("entry %d at %d overruns the table", i, off)
		}
		e := entries[off:]
		targetOff, next := int(le.Uint16(e[at:])), int(le.Uint16(e[at+2:]))
		if targetOff < esize || next <= targetOff || int(off)+next > len(entries) || next%8 != 0 {
			t.Fatalf("entry %d: target at %d, next at %d", i, targetOff, next)
		}
		switch off {
		case hookAt(hookInput):
			chain = &d.input
		case hookAt(hookForward):
			chain = &d.forward
		case hookAt(hookOutput):
			chain = &d.output
		}
		target := e[targetOff:next]
		tname := string(bytes.TrimRight(target[2:31], "\x00"))
		if int(le.Uint16(target)) != len(target) {
			t.Fatalf("entry %d: target size %d in %d bytes", i, le.Uint16(target), len(target))
		}
		if i == num-1 {
			if tname != "ERROR" || int(off)+next != len(entries) {
				t.Fatalf("last entry: target %q, ends at %d of %d", tname, int(off)+next, len(entries))
			}
			break
		}
		var r iptRule
		r.src = prefixOf(t, e[0:alen], e[2*alen:3*alen])
		r.dst = prefixOf(t, e[alen:2*alen], e[3*alen:4*alen])
		ifaces := 4 * alen
		r.in = string(bytes.TrimRight(e[ifaces:ifaces+16], "\x00"))
		r.out = string(bytes.TrimRight(e[ifaces+16:ifaces+32], "\x00"))
		r.proto = uint8(le.Uint16(e[ifaces+64:]))
		if v6 && (r.proto != 0) != (e[ifaces+67]&ip6tFlagProto != 0) {
			t.Fatalf("entry %d: protocol %d, IP6T_F_PROTO %v", i, r.proto, e[ifaces+67])
		}
		if m := e[esize:targetOff]; len(m) > 0 {
			mname := string(bytes.TrimRight(m[2:31], "\x00"))
			if int(le.Uint16(m)) != len(m) || (mname == "tcp") != (r.proto == unix.IPPROTO_TCP) || (mname == "udp") != (r.proto == unix.IPPROTO_UDP) {
				t.Fatalf("entry %d: match %q of %d bytes for protocol %d", i, mname, le.Uint16(m), r.proto)
			}
			md := m[sizeMatchHeader:]
			r.sport, r.dport = portOf(t, le.Uint16(md[0:]), le.Uint16(md[2:])), portOf(t, le.Uint16(md[4:]), le.Uint16(md[6:]))
			r.syn = mname == "tcp" && md[9] == tcpFlagSYN|tcpFlagACK && md[10] == tcpFlagSYN
		}
		switch tname {
		case "":
			if v := int32(le.Uint32(target[sizeTargetHeader:])); v != verdictAccept {
				t.Fatalf("entry %d: verdict %d", i, v)
			}
		case "REJECT":
			with := le.Uint32(target[sizeTargetHeader:])
			reset, unreachable := uint32(7), uint32(3)
			if v6 {
				reset, unreachable = 6, 4
			}
			switch with {
			case reset:
				r.target = iptRejectReset
				if r.proto != unix.IPPROTO_TCP {
					t.Fatalf("entry %d: a TCP reset for protocol %d", i, r.proto)
				}
			case unreachable:
				r.target = iptRejectUnreachable
			default:
				t.Fatalf("entry %d: reject with %d", i, with)
			}
		default:
			t.Fatalf("entry %d: target %q", i, tname)
		}
		if off == underflowAt(hookInput) || off == underflowAt(hookForward) || off == underflowAt(hookOutput) {
			if r != (iptRule{}) {
				t.Fatalf("policy entry %d is %+v, want an unconditional ACCEPT", i, r)
			}
			d.policies++
			chain = nil
		} else if chain == nil {
			t.Fatalf("entry %d at %d is in no chain", i, off)
		} else {
			*chain = append(*chain, r)
		}
		off += uint32(next)
	}
	return d
}

func prefixOf(t *testing.T, addr, mask []byte) netip.Prefix {
	t.Helper()
	bits := 0
	for _, m := range mask {
		for m&0x80 != 0 {
			bits, m = bits+1, m<<1
		}
		if m != 0 {
			t.Fatalf("mask %x is not a prefix", mask)
		}
	}
	if bits == 0 {
		return netip.Prefix{}
	}
	a, _ := netip.AddrFromSlice(addr)
	return netip.PrefixFrom(a, bits)
}

func portOf(t *testing.T, lo, hi uint16) uint16 {
	t.Helper()
	switch {
	case lo == 0 && hi == 0xffff:
		return 0
	case lo == hi:
		return lo
	}
	t.Fatalf("port range %d-%d", lo, hi)
	return 0
}

// The table decodes back to the rules it was made of, for both families,
// with FORWARD empty and every chain ending in an accepting policy.
func TestIPTablesEncodingRoundTrips(t *testing.T) {
	r := Rules{
		Refuse:    append(DefaultRefused(), netip.MustParsePrefix("203.0.113.7/32"), netip.MustParsePrefix("2001:db8::/32")),
		Resolvers: []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00::a")},
		AgentPort: 49983,
	}
	for _, v6 := range []bool{false, true} {
		input, output := iptChains(r, v6)
		d := decode(t, iptReplace(input, output, v6), v6)
		opts := cmp.AllowUnexported(iptRule{}, netip.Prefix{})
		if diff := cmp.Diff(input, d.input, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }), opts); diff != "" {
			t.Errorf("v6=%v INPUT (-made +decoded):\n%s", v6, diff)
		}
		if diff := cmp.Diff(output, d.output, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }), opts); diff != "" {
			t.Errorf("v6=%v OUTPUT (-made +decoded):\n%s", v6, diff)
		}
		if len(d.forward) != 0 || d.policies != 3 {
			t.Errorf("v6=%v: FORWARD %v, %d policies", v6, d.forward, d.policies)
		}
	}
}

// One rule's bytes, laid out as iptables-legacy writes `-A OUTPUT -d
// 10.0.0.0/8 -p tcp --tcp-flags SYN,ACK SYN -j REJECT --reject-with
// tcp-reset` (checked against it and gVisor's reading of it).
func TestIPTablesEntryLayout(t *testing.T) {
	e := iptEntry(iptRule{dst: netip.MustParsePrefix("10.0.0.0/8"), proto: unix.IPPROTO_TCP, syn: true, target: iptRejectReset}, false)
	le := binary.NativeEndian
	if len(e) != 112+48+40 {
		t.Fatalf("%d bytes, want the entry (112), an xt_tcp match (48) and a REJECT target (40)", len(e))
	}
	checks := []struct {
		what string
		got  []byte
		want []byte
	}{
		{"dst", e[4:8], []byte{10, 0, 0, 0}},
		{"dmsk", e[12:16], []byte{0xff, 0, 0, 0}},
		{"proto", e[80:82], le.AppendUint16(nil, unix.IPPROTO_TCP)},
		{"target_offset, next_offset", e[88:92], le.AppendUint16(le.AppendUint16(nil, 160), 200)},
		{"match size and name", e[112:117], append(le.AppendUint16(nil, 48), "tcp"...)},
		{"xt_tcp ports", e[144:152], []byte{0, 0, 0xff, 0xff, 0, 0, 0xff, 0xff}},
		{"xt_tcp flags", e[152:156], []byte{0, 0x12, 0x02, 0}},
		{"target size and name", e[160:168], append(le.AppendUint16(nil, 40), "REJECT"...)},
		{"reject with", e[192:196], le.AppendUint32(nil, 7)},
	}
	for _, c := range checks {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s: % x, want % x", c.what, c.got, c.want)
		}
	}
	e6 := iptEntry(iptRule{out: "lo", proto: unix.IPPROTO_ICMPV6}, true)
	if len(e6) != 168+40 || !bytes.Equal(e6[80:83], []byte("lo\x00")) || !bytes.Equal(e6[112:116], []byte{0xff, 0xff, 0xff, 0}) ||
		e6[128] != unix.IPPROTO_ICMPV6 || e6[131] != ip6tFlagProto || le.Uint16(e6[140:]) != 168 {
		t.Errorf("ip6t_entry for -o lo -p icmpv6: % x", e6[:168])
	}
}

// What the chains promise, in order: from the pod, DNS to the resolvers
// passes before any refusal, a connection to a refused network is
// refused before the agent's replies pass; into it, no connection opens
// but to the agent's port, not even from a resolver, and only the
// resolvers' answers and ICMP pass from refused networks.
func TestIPTablesChains(t *testing.T) {
	r := Rules{
		Refuse:    []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fc00::/7")},
		Resolvers: []netip.Addr{netip.MustParseAddr("10.0.0.53")},
		AgentPort: 49983,
	}
	input, output := iptChains(r, false)
	index := func(rules []iptRule, match func(iptRule) bool) int { return slices.IndexFunc(rules, match) }
	dns := index(output, func(x iptRule) bool { return x.dport == 53 && x.target == iptAccept })
	syn := index(output, func(x iptRule) bool { return x.syn && x.target == iptRejectReset })
	agent := index(output, func(x iptRule) bool { return x.sport == 49983 && x.target == iptAccept })
	refuse := index(output, func(x iptRule) bool { return !x.syn && x.target == iptRejectUnreachable })
	if output[0].out != "lo" || dns < 0 || syn < dns || agent < syn || refuse < agent {
		t.Errorf("OUTPUT out of order (dns %d, syn %d, agent %d, refuse %d): %+v", dns, syn, agent, refuse, output)
	}
	if slices.ContainsFunc(append(input, output...), func(x iptRule) bool {
		return x.dst.Addr().Is6() || x.src.Addr().Is6()
	}) {
		t.Error("an IPv6 network in the IPv4 table")
	}
	syn = index(input, func(x iptRule) bool { return x.syn })
	agent = index(input, func(x iptRule) bool { return x.dport == 49983 })
	dns = index(input, func(x iptRule) bool { return x.sport == 53 })
	if input[0].in != "lo" || agent < 0 || syn < agent || dns < syn || input[syn].src.IsValid() || input[syn].target != iptRejectReset {
		t.Errorf("INPUT: no connection opens but to the agent's port (agent %d, syn %d, dns %d): %+v", agent, syn, dns, input)
	}
	accepts := slices.DeleteFunc(slices.Clone(input), func(x iptRule) bool { return x.target != iptAccept })
	want := []iptRule{{in: "lo"}, {proto: unix.IPPROTO_TCP, dport: 49983},
		{src: netip.MustParsePrefix("10.0.0.53/32"), proto: unix.IPPROTO_UDP, sport: 53},
		{src: netip.MustParsePrefix("10.0.0.53/32"), proto: unix.IPPROTO_TCP, sport: 53},
		{proto: unix.IPPROTO_ICMP}}
	if diff := cmp.Diff(want, accepts, cmp.AllowUnexported(iptRule{}), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("INPUT accepts (-want +got):\n%s", diff)
	}
}

// A neighbour the pod reaches is sent anything before any refusal and
// answers anything but a connection's opening; one that reaches the pod
// opens connections to any port and gets anything but an opening back.
func TestIPTablesChainsNeighbours(t *testing.T) {
	reach, by := netip.MustParsePrefix("10.1.0.7/32"), netip.MustParsePrefix("10.2.0.9/32")
	r := Rules{
		Refuse:    []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		AgentPort: 49983,
		Reaches:   []netip.Addr{reach.Addr(), netip.MustParseAddr("fd00::7")},
		ReachedBy: []netip.Addr{by.Addr()},
	}
	input, output := iptChains(r, false)
	index := func(rules []iptRule, match func(iptRule) bool) int { return slices.IndexFunc(rules, match) }
	accepts := func(rules []iptRule, field func(iptRule) netip.Prefix, p netip.Prefix) int {
		return index(rules, func(x iptRule) bool { return field(x) == p && x.target == iptAccept && x.proto == 0 })
	}
	dst := func(x iptRule) netip.Prefix { return x.dst }
	src := func(x iptRule) netip.Prefix { return x.src }
	synOut := index(output, func(x iptRule) bool { return x.syn })
	refuseOut := index(output, func(x iptRule) bool { return !x.syn && x.target != iptAccept })
	if i := accepts(output, dst, reach); i < 0 || i > synOut {
		t.Errorf("OUTPUT: the neighbour it reaches (at %d) must pass before openings are refused (%d): %+v", i, synOut, output)
	}
	if i := accepts(output, dst, by); i < synOut || i > refuseOut {
		t.Errorf("OUTPUT: answers to the neighbour that reaches it (at %d) must pass after openings are refused (%d) and before the rest is (%d): %+v", i, synOut, refuseOut, output)
	}
	synIn := index(input, func(x iptRule) bool { return x.syn })
	refuseIn := index(input, func(x iptRule) bool { return x.target != iptAccept && !x.syn })
	if i := accepts(input, src, by); i < 0 || i > synIn {
		t.Errorf("INPUT: the neighbour that reaches it (at %d) must pass before openings are refused (%d): %+v", i, synIn, input)
	}
	if i := accepts(input, src, reach); i < synIn || i > refuseIn {
		t.Errorf("INPUT: answers of the neighbour it reaches (at %d) must pass after openings are refused (%d) and before the rest is (%d): %+v", i, synIn, refuseIn, input)
	}
	if in6, out6 := iptChains(r, true); accepts(out6, dst, netip.MustParsePrefix("fd00::7/128")) < 0 || accepts(in6, src, netip.MustParsePrefix("fd00::7/128")) < 0 {
		t.Errorf("IPv6: the neighbour it reaches is not open: %+v %+v", in6, out6)
	}
}
