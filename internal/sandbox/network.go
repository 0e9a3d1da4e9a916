package sandbox

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// Firewall enforces network isolation and egress rules on the host. The
// lifecycle manager calls it whenever a sandbox's container gets or loses
// an address, and when a client changes the rules. Implementation:
// internal/firewall (iptables).
type Firewall interface {
	// Apply installs or replaces the egress rules of the sandbox whose
	// container has address e.IP. Until a sandbox's rules are applied its
	// container has no network beyond replies to the host.
	Apply(ctx context.Context, sandboxID string, e Egress) error
	// Remove deletes a sandbox's rules; unknown sandboxes are no error.
	Remove(ctx context.Context, sandboxID string) error
	// Sync replaces every sandbox's rules with rules, keyed by sandbox ID,
	// and reinstalls the host-wide rules.
	Sync(ctx context.Context, rules map[string]Egress) error
	// Restore reinstalls the host-wide rules and every sandbox's rules,
	// in case something (an engine restart, an operator) removed them.
	Restore(ctx context.Context) error
	// Uninstall removes every rule the firewall installed. The manager
	// calls it when it stops with no live sandbox left to isolate.
	Uninstall(ctx context.Context) error
}

// Egress is one sandbox's address, team and rules, as the firewall
// applies them.
type Egress struct {
	IP netip.Addr
	// TeamID is the sandbox's team: a sandbox reaches another only when
	// both have the same, non-empty team and its allowOut names the
	// other's address (see NamesHost).
	TeamID  string
	Network Network
}

// ParseEgressTarget parses one allowOut or denyOut entry: an IP address
// or a CIDR prefix. An IP is the prefix of that one address. IPv4 written
// as IPv6 (::ffff:10.0.0.1, ::ffff:10.0.0.0/104) is IPv4, so that every
// spelling of an address matches it; a zone (fe80::1%eth0) is refused, as
// no rule can carry it.
func ParseEgressTarget(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("egress target %q has a zone", s)
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
}

// ValidateEgress checks a sandbox's allowOut and denyOut entries: an IP
// address or a CIDR prefix in either, and in allowOut also a domain name
// or a wildcard like *.example.com (see AllowedDomain). Domains cannot be
// denied: an address can serve any name, so only addresses can be shut.
func (n Network) ValidateEgress() error {
	for _, e := range n.AllowOut {
		if _, err := ParseEgressTarget(e); err == nil {
			continue
		}
		if _, ok := domainPattern(e); !ok {
			return Errorf(KindInvalid, "network.allowOut entry '%s' is not an IP address, a CIDR or a domain name", e)
		}
	}
	for _, e := range n.DenyOut {
		if _, err := ParseEgressTarget(e); err == nil {
			continue
		}
		if _, ok := domainPattern(e); ok {
			return Errorf(KindInvalid, "network.denyOut entry '%s': only IP addresses and CIDRs can be denied; deny all (0.0.0.0/0) and allow the domains you want in allowOut", e)
		}
		return Errorf(KindInvalid, "network.denyOut entry '%s' is not an IP address or a CIDR", e)
	}
	return nil
}

// Domains returns the domain entries of allowOut, lowercase and without a
// trailing dot; nil when there are none.
func (n Network) Domains() []string {
	var out []string
	for _, e := range n.AllowOut {
		if _, err := ParseEgressTarget(e); err == nil {
			continue
		}
		if d, ok := domainPattern(e); ok {
			out = append(out, d)
		}
	}
	return out
}

// AllowedDomain reports whether name is allowed by a domain entry of
// allowOut: "example.com" allows that name only, "*.example.com" every
// name under it (but not example.com itself). Case and a trailing dot do
// not matter.
func (n Network) AllowedDomain(name string) bool {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if name == "" {
		return false
	}
	for _, d := range n.Domains() {
		if suffix, ok := strings.CutPrefix(d, "*"); ok {
			if strings.HasSuffix(name, suffix) && len(name) > len(suffix) {
				return true
			}
		} else if name == d {
			return true
		}
	}
	return false
}

// AllowsAddr reports whether the IP rules let the sandbox reach addr:
// allowOut beats denyOut, which beats allowInternetAccess.
func (n Network) AllowsAddr(addr netip.Addr) bool {
	addr = addr.Unmap()
	in := func(entries []string) bool {
		for _, e := range entries {
			if p, err := ParseEgressTarget(e); err == nil && p.Contains(addr) {
				return true
			}
		}
		return false
	}
	switch {
	case in(n.AllowOut):
		return true
	case in(n.DenyOut):
		return false
	default:
		return n.AllowInternetAccess
	}
}

// NamesHost reports whether allowOut names addr itself: an entry that is
// that IP address, or a CIDR of that one address. Nothing wider names it
// (an allow-all, 0.0.0.0/0, the sandbox network's prefix): that is what
// opens a neighbour sandbox, whose address allowOut must pick out on
// purpose.
func (n Network) NamesHost(addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, e := range n.AllowOut {
		if p, err := ParseEgressTarget(e); err == nil && p.IsSingleIP() && p.Addr() == addr {
			return true
		}
	}
	return false
}

// Neighbour is a pair of sandboxes of which the first may reach the
// second.
type Neighbour struct {
	From, To     string // sandbox IDs
	FromIP, ToIP netip.Addr
}

// Neighbours returns the pairs of all (sandboxes by ID) in which one
// reaches the other: both have the same, non-empty team and the first's
// allowOut names the second's address itself (NamesHost). Another team's
// sandbox is never a neighbour, named or not. The pairs come in the order
// of the first's ID, then of its allowOut. Every engine's firewall opens
// these pairs and no others.
func Neighbours(all map[string]Egress) []Neighbour {
	ids := slices.Sorted(maps.Keys(all))
	byIP := make(map[netip.Addr]string, len(all))
	for _, id := range ids {
		if ip := all[id].IP; ip.IsValid() {
			byIP[ip] = id
		}
	}
	var out []Neighbour
	for _, id := range ids {
		e := all[id]
		if !e.IP.IsValid() || e.TeamID == "" {
			continue
		}
		for _, s := range e.Network.AllowOut {
			p, err := ParseEgressTarget(s)
			if err != nil || !p.IsSingleIP() {
				continue
			}
			to, ok := byIP[p.Addr()]
			if !ok || to == id || all[to].TeamID != e.TeamID {
				continue
			}
			out = append(out, Neighbour{From: id, To: to, FromIP: e.IP, ToIP: p.Addr()})
		}
	}
	return out
}

// Restricted reports whether the rules deny anything.
func (n Network) Restricted() bool {
	return len(n.DenyOut) > 0 || !n.AllowInternetAccess
}

// domainPattern normalises a domain entry: a host name of letters, digits
// and hyphens in dot-separated labels of 1 to 63 characters, at most 253
// in all, with at least two labels, optionally after "*.". It returns it
// lowercase without a trailing dot. A top-level label of digits only is
// refused (no top-level domain is numeric), so that an address with a
// trailing dot ("10.0.0.1.") is not taken for a name.
func domainPattern(s string) (string, bool) {
	d := strings.ToLower(strings.TrimSuffix(s, "."))
	host := strings.TrimPrefix(d, "*.")
	if !strings.Contains(host, ".") || !hostLabels(host) {
		return "", false
	}
	return d, true
}
