// Package podnet isolates a sandbox's pod on the Kubernetes engine from
// inside its own network namespace, with nftables: what the firewall
// (internal/firewall) does on the Docker engine's bridge, done where it
// holds whatever CNI the cluster runs and needs nothing installed on the
// nodes. The sandbox pod's init container (`warren node isolate`, with
// CAP_NET_ADMIN, which the sandbox container lacks) installs the rules,
// then copies the agent in, and exits; the kubelet starts the sandbox
// container only once it succeeded, so a pod whose namespace could not be
// programmed never runs its agent, never becomes ready, and is never
// claimed.
//
// The rules are one table, inet warren. Out of the pod: replies and
// loopback pass; DNS (UDP and TCP port 53) passes to the resolvers of the
// pod's resolv.conf; every other packet to a refused network is refused
// at once (a TCP reset, else an ICMP administratively prohibited), so a
// probe fails fast instead of hanging. Into the pod: replies, loopback
// and the agent's port pass (every other port is tunnelled through the
// agent), everything else is refused the same way.
//
// Rules.Reaches and Rules.ReachedBy open a sandbox's named neighbours of
// the same team (which the control plane picks): out of the pod to the
// first, into it from the second, before any refusal. A running pod's
// rules are replaced whole by a later run of the same command (the
// Kubernetes engine's ephemeral containers).
//
// Under gVisor, whose kernel has no nftables, ApplyIPTables sets the
// same Rules as gVisor's netstack's iptables tables (iptables.go).
//
// It does not choose the refused networks beyond DefaultRefused: the
// control plane adds the cluster's own (node addresses, pod networks, the
// API server) on the init container's command line.
package podnet

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Table is the name of the inet table Apply owns.
const Table = "warren"

// Rules is what a pod's namespace lets through.
type Rules struct {
	// Refuse are the networks the pod may not reach (nor be reached
	// from, beyond AgentPort). DefaultRefused and the cluster's own.
	Refuse []netip.Prefix
	// Resolvers may be sent DNS (port 53, UDP and TCP) even where Refuse
	// covers them: the resolvers of the pod's resolv.conf.
	Resolvers []netip.Addr
	// AgentPort is the only TCP port that takes connections from outside
	// the pod. 0: none.
	AgentPort uint16
	// Reaches are addresses the pod may send anything to (and get the
	// replies), though Refuse covers them: the same-team sandboxes its
	// allowOut names. Nil: none.
	Reaches []netip.Addr
	// ReachedBy are addresses that may open connections to any of the
	// pod's ports: the same-team sandboxes whose allowOut names it. Nil:
	// none.
	ReachedBy []netip.Addr
}

// DefaultRefused are the networks no sandbox pod reaches, whatever the
// cluster: the private, shared (CGNAT) and unique-local ranges where a
// cluster keeps its nodes, pods, Services and API server, link-local
// (cloud metadata at 169.254.169.254 and fd00:ec2::254 among them),
// "this network", the IETF protocol assignments, benchmarking, site-local
// and local-use NAT64 (which would lead to any of them).
func DefaultRefused() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15",
		"fc00::/7", "fe80::/10", "fec0::/10", "64:ff9b:1::/48",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// Apply replaces the table of the current network namespace's ruleset
// with r's, in one commit: never a moment with half the rules.
func Apply(r Rules) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("nftables: listing tables: %w", err)
	}
	if slices.ContainsFunc(tables, func(t *nftables.Table) bool { return t.Name == Table }) {
		c.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: Table})
	}
	build(c, r)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: installing table inet %s: %w", Table, err)
	}
	return nil
}

// build adds r's table to c's batch.
func build(c *nftables.Conn, r Rules) {
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: Table})
	refuse := c.AddChain(&nftables.Chain{Name: "refuse", Table: t})
	c.AddRule(&nftables.Rule{Table: t, Chain: refuse, Exprs: append(l4proto(unix.IPPROTO_TCP),
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST})})
	c.AddRule(&nftables.Rule{Table: t, Chain: refuse, Exprs: []expr.Any{
		&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}}})

	accept := nftables.ChainPolicyAccept
	out := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	in := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	for _, ch := range []*nftables.Chain{out, in} {
		key := expr.MetaKeyOIF
		if ch == in {
			key = expr.MetaKeyIIF
		}
		// Loopback is index 1 in every namespace.
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
			&expr.Meta{Key: key, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(1)},
			verdict(expr.VerdictAccept)}})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
				Xor:  make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
			verdict(expr.VerdictAccept)}})
		// IPv6 neighbour discovery (router and neighbour solicitations and
		// advertisements) goes to link-local and multicast addresses.
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(append(family(unix.NFPROTO_IPV6), l4proto(unix.IPPROTO_ICMPV6)...),
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
			&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: []byte{133}, ToData: []byte{136}},
			verdict(expr.VerdictAccept))})
	}
	for _, a := range r.Resolvers {
		for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
			c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: append(append(daddr(netip.PrefixFrom(a, a.BitLen())), l4proto(proto)...),
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(53)},
				verdict(expr.VerdictAccept))})
		}
	}
	for _, a := range r.Reaches {
		c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: append(daddr(netip.PrefixFrom(a, a.BitLen())), verdict(expr.VerdictAccept))})
	}
	for _, a := range r.ReachedBy {
		c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: append(saddr(netip.PrefixFrom(a, a.BitLen())), verdict(expr.VerdictAccept))})
	}
	for _, p := range r.Refuse {
		c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: append(daddr(p.Masked()),
			&expr.Verdict{Kind: expr.VerdictJump, Chain: refuse.Name})})
	}
	if r.AgentPort != 0 {
		c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: append(l4proto(unix.IPPROTO_TCP),
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(r.AgentPort)},
			verdict(expr.VerdictAccept))})
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: []expr.Any{
		&expr.Verdict{Kind: expr.VerdictJump, Chain: refuse.Name}}})
}

func verdict(k expr.VerdictKind) *expr.Verdict { return &expr.Verdict{Kind: k} }

// family matches packets of one address family (NFPROTO_IPV4 or _IPV6).
func family(f byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{f}},
	}
}

// l4proto matches packets of one transport protocol.
func l4proto(p byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

// daddr matches packets whose destination is in p.
func daddr(p netip.Prefix) []expr.Any { return addr(p, 16, 24) }

// saddr matches packets whose source is in p.
func saddr(p netip.Prefix) []expr.Any { return addr(p, 12, 8) }

// addr matches packets whose address at offset (off4 in an IPv4 header,
// off6 in an IPv6 one) is in p.
func addr(p netip.Prefix, off4, off6 uint32) []expr.Any {
	f, off, n := byte(unix.NFPROTO_IPV4), off4, uint32(4)
	if p.Addr().Is6() {
		f, off, n = unix.NFPROTO_IPV6, off6, 16
	}
	out := append(family(f), &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n})
	if p.Bits() < p.Addr().BitLen() {
		mask := make([]byte, n)
		for i := range p.Bits() {
			mask[i/8] |= 0x80 >> (i % 8)
		}
		out = append(out, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: mask, Xor: make([]byte, n)})
	}
	return append(out, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Addr().AsSlice()})
}

// Nameservers returns the addresses of a resolv.conf's nameserver lines.
func Nameservers(resolvConf []byte) []netip.Addr {
	var out []netip.Addr
	for _, line := range strings.Split(string(resolvConf), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err == nil {
				out = append(out, a.Unmap().WithZone(""))
			}
		}
	}
	return out
}
