package firewall

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"

	"github.com/warrenhq/warren/internal/egress"
	"github.com/warrenhq/warren/internal/sandbox"
)

// chains names the chains of one server (instance) on one bridge.
// iptables allows 28 characters and an interface name has at most 15, so
// "WRN-<bridge>-<tag>-F" fits with a 6-digit tag. Servers sharing a
// bridge each own their chains: a packet goes through all of them, and
// each decides only for its own sandboxes' addresses.
type chains struct {
	bridge string
	build  string // the template builds' bridge; "" when builds are not covered
	// buildRefused are networks beyond the host and the sandboxes that
	// builds may not reach (Firewall.RefuseToBuilds).
	buildRefused []netip.Prefix
	tag          string // 6 hex digits naming the instance
	input        string // jumped to from INPUT for packets from the bridge
	forward      string // jumped to from DOCKER-USER (or FORWARD) likewise
	redirect     string // in the nat table, jumped to from PREROUTING likewise
}

func chainsFor(bridge, build, instance string) chains {
	sum := sha256.Sum256([]byte(instance))
	tag := hex.EncodeToString(sum[:3])
	return chains{
		bridge:   bridge,
		build:    build,
		tag:      tag,
		input:    "WRN-" + bridge + "-" + tag + "-I",
		forward:  "WRN-" + bridge + "-" + tag + "-F",
		redirect: "WRN-" + bridge + "-" + tag + "-N",
	}
}

// comment is the comment of every rule Warren installs, "warren:<bridge>:
// <tag> what", so that `iptables-save | grep warren:` lists them all.
func (c chains) comment(what string) string {
	return "warren:" + c.bridge + ":" + c.tag + " " + what
}

// quoted is comment quoted for iptables-restore.
func (c chains) quoted(what string) string { return strconv.Quote(c.comment(what)) }

// jump is a rule, in iptables' argument form, sending the packets that
// arrive from interface in from a built-in chain to one of ours.
func (c chains) jump(in, target, what string) []string {
	return []string{"-i", in, "-m", "comment", "--comment", c.comment(what), "-j", target}
}

// ruleset renders the chains of a bridge from the sandboxes' rules. For
// IPv4 the forward chain holds every sandbox's egress rules, and the
// redirect chain sends the DNS and the denied TCP connections of sandboxes
// with domain rules to the egress server at ports (none while its ports
// are zero); sandboxes have no IPv6 (the network is created without it),
// so for IPv6 the chains refuse everything but replies.
func (c chains) ruleset(v6 bool, rules map[string]sandbox.Egress, ports egress.Ports) ruleset {
	var rs ruleset
	input, forward := rs.chain("filter", c.input), rs.chain("filter", c.forward)

	host := input.group("fixed", false)
	host.add("-m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment", c.quoted("replies to the host"), "-j RETURN")
	// Only a nat rule sends a sandbox's packet to the host with its
	// destination rewritten: the redirects to this server's egress server,
	// or to another Warren server's on the same bridge, whose packets go
	// through this chain too.
	if !v6 {
		host.add("-m conntrack --ctstate DNAT -m comment --comment", c.quoted("redirected to an egress server"), "-j RETURN")
	}
	host.add("-m comment --comment", c.quoted("sandboxes cannot reach the host"), "-j REJECT")

	fixed := forward.group("fixed", false)
	fixed.add("-m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment", c.quoted("replies"), "-j RETURN")
	if v6 {
		fixed.add("-m comment --comment", c.quoted("sandboxes have no IPv6"), "-j REJECT")
		return rs
	}
	fixed.add("-o", c.bridge, "-p tcp --dport", strconv.Itoa(sandbox.AgentPort),
		"-m comment --comment", c.quoted("no sandbox reaches another sandbox agent"), "-j REJECT")
	fixed.add("-d 169.254.0.0/16 -m comment --comment", c.quoted("no link-local or cloud metadata"), "-j REJECT")
	if c.build != "" {
		fixed.add("-i", c.build, "-o", c.build, "-m comment --comment", c.quoted("no template build reaches another"), "-j REJECT")
		for _, p := range c.buildRefused {
			if p.Addr().Is4() {
				fixed.add("-i", c.build, "-d", p.String(), "-m comment --comment", c.quoted("no template build reaches "+p.String()), "-j REJECT")
			}
		}
	}
	c.neighbourRules(forward, rules)
	for _, id := range slices.Sorted(maps.Keys(rules)) {
		e := rules[id]
		if !e.IP.Is4() {
			continue
		}
		g := forward.sandboxGroup(id)
		src := "-s " + e.IP.String() + "/32"
		for _, s := range e.Network.AllowOut {
			if p, err := sandbox.ParseEgressTarget(s); err == nil && p.Addr().Is4() {
				g.add(src, "-d", p.String(), "-m comment --comment", c.quoted("sandbox="+id+" allowOut"), "-j RETURN")
			}
		}
		for _, s := range e.Network.DenyOut {
			if p, err := sandbox.ParseEgressTarget(s); err == nil && p.Addr().Is4() {
				g.add(src, "-d", p.String(), "-m comment --comment", c.quoted("sandbox="+id+" denyOut"), "-j REJECT")
			}
		}
		if !e.Network.AllowInternetAccess {
			g.add(src, "-m comment --comment", c.quoted("sandbox="+id+" no internet access"), "-j REJECT")
		}
		g.add(src, "-m comment --comment", c.quoted("sandbox="+id+" allowed"), "-j RETURN")
	}
	redirect := rs.chain("nat", c.redirect)
	if ports != (egress.Ports{}) {
		c.redirectRules(redirect, rules, ports)
	}
	return rs
}

// neighbourRules keep sandboxes off each other's addresses on the bridge,
// before any allowOut rule can open them: a sandbox reaches another only
// when both are this server's, of the same team, and its allowOut names
// the other's address itself (sandbox.Network.NamesHost). Every other
// packet from one of this server's sandboxes to the bridge, and every
// packet from the bridge (another server's sandbox, a container that is
// no sandbox) to one of them, is refused. A named pair is opened only for
// packets that come from the sandbox bridge, so that a build step (which
// may forge addresses: it has NET_RAW) cannot claim a sandbox's. Each server only judges its own
// sandboxes' addresses, so servers sharing the bridge do not refuse each
// other's named pairs.
func (c chains) neighbourRules(forward *chainRules, rules map[string]sandbox.Egress) {
	ids := slices.Sorted(maps.Keys(rules))
	// Both groups hold rules of one target each, in any order.
	pairs, apart := forward.group("pairs", true), forward.group("apart", true)
	for _, n := range sandbox.Neighbours(rules) {
		if !n.FromIP.Is4() || !n.ToIP.Is4() {
			continue
		}
		pairs.add("-i", c.bridge, "-s", n.FromIP.String()+"/32", "-d", n.ToIP.String()+"/32", "-o", c.bridge, "-m comment --comment",
			c.quoted("sandbox="+n.From+" reaches sandbox="+n.To+" (same team, named in allowOut)"), "-j RETURN")
	}
	for _, id := range ids {
		if ip := rules[id].IP; ip.Is4() {
			apart.add("-s", ip.String()+"/32", "-o", c.bridge, "-m comment --comment", c.quoted("sandbox="+id+" reaches no other sandbox"), "-j REJECT")
			apart.add("-d", ip.String()+"/32", "-o", c.bridge, "-m comment --comment", c.quoted("no other sandbox reaches sandbox="+id), "-j REJECT")
		}
	}
}

// redirectRules sends to the egress server, from each sandbox with domains
// in allowOut and rules that deny something: its DNS, and its TCP
// connections to addresses its rules deny (what allowOut allows by address,
// the host's own addresses and link-local ones are left to the filter
// chains). From a sandbox with header rules or an egress proxy it sends
// every TCP connection but to the host and link-local addresses, and its
// DNS when it needs names checked or a rule is keyed by a name.
func (c chains) redirectRules(redirect *chainRules, rules map[string]sandbox.Egress, ports egress.Ports) {
	dns, gw := strconv.Itoa(int(ports.DNS)), strconv.Itoa(int(ports.Gateway))
	for _, id := range slices.Sorted(maps.Keys(rules)) {
		e := rules[id]
		byName := len(e.Network.Domains()) > 0 && e.Network.Restricted()
		allTCP := egress.Intercepts(e.Network)
		if !e.IP.Is4() || !byName && !allTCP {
			continue
		}
		g := redirect.sandboxGroup(id)
		src := "-s " + e.IP.String() + "/32"
		note := func(what string) string { return c.quoted("sandbox=" + id + " " + what) }
		if byName || egress.NeedsDNS(e.Network) {
			for _, proto := range []string{"udp", "tcp"} {
				g.add(src, "-p", proto, "--dport 53 -m comment --comment", note("dns"), "-j REDIRECT --to-ports", dns)
			}
		}
		g.add(src, "-m addrtype --dst-type LOCAL -m comment --comment", note("host"), "-j RETURN")
		g.add(src, "-d 169.254.0.0/16 -m comment --comment", note("link-local"), "-j RETURN")
		if allTCP {
			g.add(src, "-p tcp -m comment --comment", note("header rules or egress proxy: all TCP through the gateway"), "-j REDIRECT --to-ports", gw)
			continue
		}
		for _, s := range e.Network.AllowOut {
			if p, err := sandbox.ParseEgressTarget(s); err == nil && p.Addr().Is4() {
				g.add(src, "-d", p.String(), "-m comment --comment", note("allowOut"), "-j RETURN")
			}
		}
		for _, s := range e.Network.DenyOut {
			if p, err := sandbox.ParseEgressTarget(s); err == nil && p.Addr().Is4() {
				g.add(src, "-d", p.String(), "-p tcp -m comment --comment", note("denyOut by name"), "-j REDIRECT --to-ports", gw)
			}
		}
		if !e.Network.AllowInternetAccess {
			g.add(src, "-p tcp -m comment --comment", note("no internet access but by name"), "-j REDIRECT --to-ports", gw)
		}
	}
}

// validateBridge checks that a bridge name is safe in iptables arguments
// and short enough for our chain names.
func validateBridge(bridge string) error {
	if bridge == "" || len(bridge) > 15 {
		return fmt.Errorf("firewall: bridge interface name %q must have 1 to 15 characters", bridge)
	}
	for _, r := range bridge {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("firewall: bridge interface name %q has a character iptables rules cannot carry", bridge)
		}
	}
	return nil
}
