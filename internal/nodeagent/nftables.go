package nodeagent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"reflect"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/egress"
	"github.com/warrenhq/warren/internal/sandbox"
)

// TableName is the name of the ip table a node's agent owns in the node's
// network namespace: one per node, since nodes may share a namespace (the
// test cluster's do), beside whatever else lives there (kube-proxy's,
// Docker's, another Warren server's firewall), which it never touches.
func TableName(node string) string {
	sum := sha256.Sum256([]byte(node))
	return "warren-egress-" + hex.EncodeToString(sum[:4])
}

// nodeTable is what a node agent's table holds: for every sandbox pod of
// the node with egress settings, its DNS and TCP are sent (DNAT, in the
// node's namespace, so the gateway reads where each connection was going
// with SO_ORIGINAL_DST) to the gateway at node:ports, and its other
// packets forwarded out of the node are refused as its settings say
// (allowOut beats denyOut, which beats allowInternetAccess), with a TCP
// reset or an ICMP port unreachable, never a silent drop: the Docker
// engine's REJECT, and the one ICMP error gVisor's netstack tells a UDP
// socket (it ignores administratively prohibited, and a sandbox would
// wait out its timeout).
// A single address allowOut names in a network the gateway never connects
// into is left to go direct, neither sent to the gateway nor refused: a
// same-team neighbour, which only the pods' own rules open (a named
// address that is no such neighbour, the sender's pod refuses before its
// packet gets here).
type nodeTable struct {
	name      string
	node      netip.Addr
	ports     egress.Ports
	sandboxes []tableSandbox // by address
}

// tableSandbox is one sandbox's part of the table.
type tableSandbox struct {
	ip          netip.Addr
	allow, deny []netip.Prefix // IPv4 only: the pods have no other
	internet    bool
	direct      []netip.Addr // neighbours named in allowOut
}

// planTable renders the table of sandboxes, shut the networks the gateway
// never connects into.
func planTable(name string, node netip.Addr, ports egress.Ports, sandboxes []EgressSandbox, shut []netip.Prefix) nodeTable {
	t := nodeTable{name: name, node: node, ports: ports}
	for _, sb := range sortedSandboxes(sandboxes) {
		ts := tableSandbox{ip: sb.IP, internet: sb.Network.AllowInternetAccess}
		ts.allow = v4Targets(sb.Network.AllowOut)
		ts.deny = v4Targets(sb.Network.DenyOut)
		for _, p := range ts.allow {
			if p.IsSingleIP() && slices.ContainsFunc(shut, func(s netip.Prefix) bool { return s.Contains(p.Addr()) }) {
				ts.direct = append(ts.direct, p.Addr())
			}
		}
		t.sandboxes = append(t.sandboxes, ts)
	}
	return t
}

// v4Targets are the IPv4 addresses and CIDRs among allowOut or denyOut
// entries (the rest are domains, which the gateway judges).
func v4Targets(entries []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range entries {
		if p, err := sandbox.ParseEgressTarget(s); err == nil && p.Addr().Is4() {
			out = append(out, p)
		}
	}
	return out
}

func (t nodeTable) equal(o nodeTable) bool { return reflect.DeepEqual(t, o) }

// writeTable replaces the table in the current network namespace, in one
// transaction: never a moment with half the rules, or none.
func writeTable(t nodeTable) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return fmt.Errorf("nftables: listing tables: %w", err)
	}
	if slices.ContainsFunc(tables, func(x *nftables.Table) bool { return x.Name == t.name }) {
		c.DelTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: t.name})
	}
	t.build(c)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: writing table ip %s: %w", t.name, err)
	}
	return nil
}

// removeTable deletes the table, if it is there.
func removeTable(name string) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return fmt.Errorf("nftables: listing tables: %w", err)
	}
	if !slices.ContainsFunc(tables, func(x *nftables.Table) bool { return x.Name == name }) {
		return nil
	}
	c.DelTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: name})
	return c.Flush()
}

// icmpPortUnreachable is the code of ICMP's destination unreachable that
// says port unreachable (RFC 792).
const icmpPortUnreachable = 3

// build adds the table to c's batch.
func (t nodeTable) build(c *nftables.Conn) {
	tb := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: t.name})
	refuse := c.AddChain(&nftables.Chain{Name: "refuse", Table: tb})
	c.AddRule(&nftables.Rule{Table: tb, Chain: refuse, Exprs: append(proto(unix.IPPROTO_TCP),
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST})})
	c.AddRule(&nftables.Rule{Table: tb, Chain: refuse, Exprs: []expr.Any{
		&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: icmpPortUnreachable}}})

	accept := nftables.ChainPolicyAccept
	nat := c.AddChain(&nftables.Chain{Name: "prerouting", Table: tb, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest, Policy: &accept})
	fwd := c.AddChain(&nftables.Chain{Name: "forward", Table: tb, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	c.AddRule(&nftables.Rule{Table: tb, Chain: fwd, Exprs: []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
		&expr.Verdict{Kind: expr.VerdictAccept}}})
	jumpRefuse := &expr.Verdict{Kind: expr.VerdictJump, Chain: refuse.Name}
	for _, sb := range t.sandboxes {
		from := addrMatch(12, netip.PrefixFrom(sb.ip, 32))
		for _, a := range sb.direct {
			c.AddRule(&nftables.Rule{Table: tb, Chain: nat, Exprs: concat(from, addrMatch(16, netip.PrefixFrom(a, 32)), []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}})})
		}
		for _, p := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
			c.AddRule(&nftables.Rule{Table: tb, Chain: nat, Exprs: concat(from, proto(p), dport(53), t.dnat(t.ports.DNS))})
		}
		c.AddRule(&nftables.Rule{Table: tb, Chain: nat, Exprs: concat(from, proto(unix.IPPROTO_TCP), t.dnat(t.ports.Gateway))})
		for _, p := range sb.allow {
			c.AddRule(&nftables.Rule{Table: tb, Chain: fwd, Exprs: concat(from, addrMatch(16, p), []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}})})
		}
		for _, p := range sb.deny {
			c.AddRule(&nftables.Rule{Table: tb, Chain: fwd, Exprs: concat(from, addrMatch(16, p), []expr.Any{jumpRefuse})})
		}
		if !sb.internet {
			c.AddRule(&nftables.Rule{Table: tb, Chain: fwd, Exprs: concat(from, []expr.Any{jumpRefuse})})
		}
	}
}

// dnat rewrites the destination to the node's address at port.
func (t nodeTable) dnat(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: t.node.AsSlice()},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

func concat(parts ...[]expr.Any) []expr.Any { return slices.Concat(parts...) }

// proto matches packets of one transport protocol.
func proto(p byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

// dport matches a TCP or UDP destination port.
func dport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
	}
}

// addrMatch matches IPv4 packets whose source (offset 12) or destination
// (16) is in p.
func addrMatch(offset uint32, p netip.Prefix) []expr.Any {
	out := []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4}}
	if p.Bits() < 32 {
		mask := make([]byte, 4)
		for i := range p.Bits() {
			mask[i/8] |= 0x80 >> (i % 8)
		}
		out = append(out, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)})
	}
	return append(out, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Masked().Addr().AsSlice()})
}
