package podnet

// The iptables backend: the same Rules for a kernel without nftables,
// gVisor's, whose network stack (netstack) filters packets with the
// filter tables of legacy iptables, set whole through
// setsockopt(IPT_SO_SET_REPLACE) on a raw socket. That takes CAP_NET_RAW
// and CAP_NET_ADMIN in the caller, and runsc's net-raw option; every
// container of a gVisor pod shares its one netstack, so the init
// container's tables hold for the sandbox container, which has neither
// capability.
//
// netstack's iptables has no connection tracking, so where the nftables
// table passes replies by their state, these rules pass them by what they
// are: out of the pod, the agent's port's segments that open no connection
// (a SYN without ACK to a refused network is refused first); into it, no
// SYN without ACK but to the agent's port, then DNS answers from the
// resolvers and ICMP (errors about the pod's own packets), and from
// refused networks nothing else. A neighbour of Rules.Reaches is sent
// anything and answers anything but a connection's first segment; one of
// Rules.ReachedBy may open connections to any port and is answered
// anything but that. A refusal is a TCP reset, else
// an ICMP port unreachable (netstack rejects with no other ICMP message),
// so a probe fails at once.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Values of the kernel's x_tables ABI (linux/netfilter_ipv4/ip_tables.h,
// linux/netfilter/x_tables.h, ipt_REJECT.h, ip6t_REJECT.h), which
// golang.org/x/sys/unix does not carry.
const (
	soSetReplace = 64 // IPT_SO_SET_REPLACE, IP6T_SO_SET_REPLACE

	sizeReplace      = 96  // struct ipt_replace (ip6t_replace alike), counters pointer included
	sizeEntry4       = 112 // struct ipt_entry
	sizeEntry6       = 168 // struct ip6t_entry
	offsetsAt4       = 88  // ipt_entry's target_offset, next_offset beside it
	offsetsAt6       = 140 // ip6t_entry's
	sizeMatchHeader  = 32  // struct xt_entry_match
	sizeTargetHeader = 32  // struct xt_entry_target
	sizeStdTarget    = 40  // struct xt_standard_target, aligned
	sizeErrorTarget  = 64  // struct xt_error_target, aligned
	sizeRejectTarget = 40  // xt_entry_target + ipt_reject_info, aligned
	sizePortMatch    = 48  // xt_entry_match + xt_tcp or xt_udp, aligned

	hookInput   = 1 // NF_INET_LOCAL_IN
	hookForward = 2 // NF_INET_FORWARD
	hookOutput  = 3 // NF_INET_LOCAL_OUT

	verdictAccept = -2 // -NF_ACCEPT - 1, an int

	ip6tFlagProto = 0x01 // IP6T_F_PROTO: ip6t_ip6.proto is to be matched

	tcpFlagSYN = 0x02
	tcpFlagACK = 0x10
)

// iptTarget is what a rule does with a packet it matches.
type iptTarget int

const (
	iptAccept iptTarget = iota
	// iptRejectReset answers a TCP packet with a reset.
	iptRejectReset
	// iptRejectUnreachable answers with an ICMP port unreachable.
	iptRejectUnreachable
)

// iptRule is one rule of a built-in chain. Zero fields match anything.
type iptRule struct {
	src, dst netip.Prefix
	in, out  string // interface names
	proto    uint8  // IPPROTO_*
	sport    uint16 // with proto TCP or UDP
	dport    uint16
	syn      bool // with proto TCP: a SYN without ACK, a connection's first segment
	target   iptTarget
}

// iptChains returns r as the rules of the INPUT and OUTPUT chains of one
// family's filter table (v6: IPv6's), whose policies accept.
func iptChains(r Rules, v6 bool) (input, output []iptRule) {
	var refuse []netip.Prefix
	for _, p := range r.Refuse {
		if p.Addr().Is6() == v6 {
			refuse = append(refuse, p.Masked())
		}
	}
	resolvers := hosts(r.Resolvers, v6)
	icmp := uint8(unix.IPPROTO_ICMP)
	if v6 {
		icmp = unix.IPPROTO_ICMPV6
	}
	reject := func(dst, src netip.Prefix) []iptRule {
		return []iptRule{
			{dst: dst, src: src, proto: unix.IPPROTO_TCP, target: iptRejectReset},
			{dst: dst, src: src, target: iptRejectUnreachable},
		}
	}

	output = append(output, iptRule{out: "lo"})
	for _, a := range resolvers {
		output = append(output,
			iptRule{dst: a, proto: unix.IPPROTO_UDP, dport: 53},
			iptRule{dst: a, proto: unix.IPPROTO_TCP, dport: 53})
	}
	// To a neighbour it reaches anything goes, a connection's first
	// segment included; to one that reaches it, all but that: the pod's
	// answers.
	reaches, reachedBy := hosts(r.Reaches, v6), hosts(r.ReachedBy, v6)
	for _, a := range reaches {
		output = append(output, iptRule{dst: a})
	}
	for _, p := range refuse {
		output = append(output, iptRule{dst: p, proto: unix.IPPROTO_TCP, syn: true, target: iptRejectReset})
	}
	if r.AgentPort != 0 {
		output = append(output, iptRule{proto: unix.IPPROTO_TCP, sport: r.AgentPort})
	}
	for _, a := range reachedBy {
		output = append(output, iptRule{dst: a})
	}
	if v6 {
		// Neighbour discovery goes to link-local and multicast addresses;
		// netstack cannot tell ICMPv6 types apart, so any ICMPv6 to them
		// passes (an echo to a neighbour's link-local address too).
		for _, p := range []string{"fe80::/10", "ff00::/8"} {
			output = append(output, iptRule{dst: netip.MustParsePrefix(p), proto: unix.IPPROTO_ICMPV6})
		}
	}
	for _, p := range refuse {
		output = append(output, reject(p, netip.Prefix{})...)
	}

	input = append(input, iptRule{in: "lo"})
	if r.AgentPort != 0 {
		input = append(input, iptRule{proto: unix.IPPROTO_TCP, dport: r.AgentPort})
	}
	for _, a := range reachedBy {
		input = append(input, iptRule{src: a})
	}
	// No other connection opens from anywhere but to the agent's port, not
	// even from a resolver's port 53 or a neighbour the pod reaches.
	input = append(input, iptRule{proto: unix.IPPROTO_TCP, syn: true, target: iptRejectReset})
	for _, a := range reaches {
		input = append(input, iptRule{src: a})
	}
	for _, a := range resolvers {
		input = append(input,
			iptRule{src: a, proto: unix.IPPROTO_UDP, sport: 53},
			iptRule{src: a, proto: unix.IPPROTO_TCP, sport: 53})
	}
	// ICMP errors about the pod's own packets (and neighbour discovery);
	// an echo from a refused network gets its answer refused on the way
	// out.
	input = append(input, iptRule{proto: icmp})
	for _, p := range refuse {
		input = append(input, reject(netip.Prefix{}, p)...)
	}
	return input, output
}

// hosts are the addresses of one family (v6: IPv6) as prefixes of one
// address.
func hosts(addrs []netip.Addr, v6 bool) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range addrs {
		if a.Is6() == v6 {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}

// iptReplace encodes the filter table of chains input and output (FORWARD
// empty, every policy accept) as setsockopt(IPT_SO_SET_REPLACE) takes it:
// an ipt_replace (ip6t_replace for v6) and its entries, the last an error
// entry that ends the table. Counters are neither kept nor returned.
func iptReplace(input, output []iptRule, v6 bool) []byte {
	entries := []byte{}
	var hooks, underflows [5]uint32
	chain := func(hook int, rules []iptRule) {
		hooks[hook] = uint32(len(entries))
		for _, r := range rules {
			entries = append(entries, iptEntry(r, v6)...)
		}
		underflows[hook] = uint32(len(entries))
		entries = append(entries, iptEntry(iptRule{}, v6)...)
	}
	chain(hookInput, input)
	chain(hookForward, nil)
	chain(hookOutput, output)
	entries = append(entries, iptErrorEntry(v6)...)
	n := len(input) + len(output) + 4 // three policies and the error entry

	b := make([]byte, sizeReplace, sizeReplace+len(entries))
	copy(b[0:32], "filter")
	le := binary.NativeEndian
	le.PutUint32(b[32:], 1<<hookInput|1<<hookForward|1<<hookOutput)
	le.PutUint32(b[36:], uint32(n))
	le.PutUint32(b[40:], uint32(len(entries)))
	for i := range 5 {
		le.PutUint32(b[44+4*i:], hooks[i])
		le.PutUint32(b[64+4*i:], underflows[i])
	}
	// num_counters and the counters pointer (84, 88) stay zero.
	return append(b, entries...)
}

// iptEntry encodes one rule: an ipt_entry (ip6t_entry), its TCP or UDP
// port match if any, and its target.
func iptEntry(r iptRule, v6 bool) []byte {
	size, at := entrySize(v6)
	e := make([]byte, size)
	le := binary.NativeEndian
	// struct ipt_ip / ip6t_ip6: addresses and masks, then the interfaces,
	// then the protocol.
	alen := 4
	if v6 {
		alen = 16
	}
	putPrefix(e[0:], e[2*alen:], r.src, alen)
	putPrefix(e[alen:], e[3*alen:], r.dst, alen)
	ifaces := 4 * alen
	putIface(e[ifaces:], e[ifaces+32:], r.in)
	putIface(e[ifaces+16:], e[ifaces+48:], r.out)
	le.PutUint16(e[ifaces+64:], uint16(r.proto))
	if v6 && r.proto != 0 {
		e[ifaces+67] = ip6tFlagProto // after proto (2 bytes) and tos (1)
	}

	var match []byte
	if r.sport != 0 || r.dport != 0 || r.syn {
		match = portMatch(r)
	}
	target := targetOf(r.target, v6)
	le.PutUint16(e[at:], uint16(size+len(match)))
	le.PutUint16(e[at+2:], uint16(size+len(match)+len(target)))
	return append(append(e, match...), target...)
}

// entrySize returns the size of an ipt_entry (ip6t_entry) and where its
// target_offset is.
func entrySize(v6 bool) (size, offsetsAt int) {
	if v6 {
		return sizeEntry6, offsetsAt6
	}
	return sizeEntry4, offsetsAt4
}

// putPrefix writes p's address and mask (nothing for the zero Prefix:
// any address).
func putPrefix(addr, mask []byte, p netip.Prefix, alen int) {
	if !p.IsValid() {
		return
	}
	copy(addr[:alen], p.Addr().AsSlice())
	for i := range p.Bits() {
		mask[i/8] |= 0x80 >> (i % 8)
	}
}

// putIface writes an interface name to match exactly: its mask covers
// the name and its terminating NUL, as iptables writes it.
func putIface(name, mask []byte, s string) {
	if s == "" {
		return
	}
	copy(name[:15], s)
	for i := 0; i <= len(s) && i < 16; i++ {
		mask[i] = 0xff
	}
}

// portMatch encodes r's ports (and SYN) as an xt_entry_match "tcp" with
// an xt_tcp, or "udp" with an xt_udp. A zero port is any port.
func portMatch(r iptRule) []byte {
	m := make([]byte, sizePortMatch)
	le := binary.NativeEndian
	le.PutUint16(m[0:], sizePortMatch)
	name := "tcp"
	if r.proto == unix.IPPROTO_UDP {
		name = "udp"
	}
	copy(m[2:31], name)
	d := m[sizeMatchHeader:]
	ports := func(at int, p uint16) {
		lo, hi := p, p
		if p == 0 {
			lo, hi = 0, 0xffff
		}
		le.PutUint16(d[at:], lo)
		le.PutUint16(d[at+2:], hi)
	}
	ports(0, r.sport)
	ports(4, r.dport)
	if r.syn {
		d[9], d[10] = tcpFlagSYN|tcpFlagACK, tcpFlagSYN // flg_mask, flg_cmp
	}
	return m
}

// targetOf encodes a standard ACCEPT target or a REJECT one.
func targetOf(t iptTarget, v6 bool) []byte {
	le := binary.NativeEndian
	if t == iptAccept {
		b := make([]byte, sizeStdTarget)
		le.PutUint16(b[0:], sizeStdTarget)
		verdict := int32(verdictAccept)
		le.PutUint32(b[sizeTargetHeader:], uint32(verdict))
		return b
	}
	b := make([]byte, sizeRejectTarget)
	le.PutUint16(b[0:], sizeRejectTarget)
	copy(b[2:31], "REJECT")
	with := map[[2]bool]uint32{
		// ipt_reject_with and ip6t_reject_with differ.
		{false, false}: 3, // IPT_ICMP_PORT_UNREACHABLE
		{false, true}:  7, // IPT_TCP_RESET
		{true, false}:  4, // IP6T_ICMP6_PORT_UNREACH
		{true, true}:   6, // IP6T_TCP_RESET
	}[[2]bool{v6, t == iptRejectReset}]
	le.PutUint32(b[sizeTargetHeader:], with)
	return b
}

// iptErrorEntry is the entry that ends a table: an unconditional ERROR
// target, as iptables writes it.
func iptErrorEntry(v6 bool) []byte {
	size, at := entrySize(v6)
	e := make([]byte, size+sizeErrorTarget)
	le := binary.NativeEndian
	le.PutUint16(e[at:], uint16(size))
	le.PutUint16(e[at+2:], uint16(size+sizeErrorTarget))
	t := e[size:]
	le.PutUint16(t[0:], sizeErrorTarget)
	copy(t[2:31], "ERROR")
	copy(t[sizeTargetHeader:], "ERROR")
	return e
}

// ErrNoIPTables is returned by ApplyIPTables where the kernel takes no
// iptables tables from this process: gVisor's without runsc's net-raw
// option, or a caller without CAP_NET_RAW.
var ErrNoIPTables = errors.New("cannot open a raw socket to set iptables")

// ApplyIPTables replaces the filter tables of the current network
// namespace, IPv4's and IPv6's, with r's: for gVisor's netstack, which
// has no nftables. Each family's table is replaced in one call; a stack
// without IPv6 gets only IPv4's.
func ApplyIPTables(r Rules) error {
	for _, v6 := range []bool{false, true} {
		if err := replaceTable(r, v6); err != nil {
			return err
		}
	}
	return nil
}

func replaceTable(r Rules, v6 bool) error {
	family, level, name := unix.AF_INET, unix.SOL_IP, "iptables"
	if v6 {
		family, level, name = unix.AF_INET6, unix.SOL_IPV6, "ip6tables"
	}
	fd, err := unix.Socket(family, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if v6 && errors.Is(err, unix.EAFNOSUPPORT) {
		return nil // no IPv6: nothing to filter
	}
	if err != nil {
		return fmt.Errorf("%s: %w: %w", name, ErrNoIPTables, err)
	}
	defer unix.Close(fd)
	input, output := iptChains(r, v6)
	blob := iptReplace(input, output, v6)
	if err := unix.SetsockoptString(fd, level, soSetReplace, string(blob)); err != nil {
		return fmt.Errorf("%s: replacing the filter table: %w", name, err)
	}
	return nil
}
