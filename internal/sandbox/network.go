package sandbox

import (
	"context"
	"net/netip"
	"strings"
)

// Firewall enforces network isolation and egress rules on the host. The
// lifecycle manager calls it whenever a sandbox's container gets or loses
// an address, and when a client changes the rules. Implementation:
// internal/firewall (iptables).
type Firewall interface {
	// Apply installs or replaces the egress rules of the sandbox whose
	// container has address ip. Until a sandbox's rules are applied its
	// container has no network beyond replies to the host.
	Apply(ctx context.Context, sandboxID string, ip netip.Addr, n Network) error
	// Remove deletes a sandbox's rules; unknown sandboxes are no error.
	Remove(ctx context.Context, sandboxID string) error
	// Sync replaces every sandbox's rules with rules, keyed by sandbox ID,
	// and reinstalls the host-wide rules.
	Sync(ctx context.Context, rules map[string]Egress) error
	// Restore reinstalls the host-wide rules and every sandbox's rules,
	// in case something (an engine restart, an operator) removed them.
	Restore(ctx context.Context) error
}

// Egress is one sandbox's address and rules, as the firewall applies them.
type Egress struct {
	IP      netip.Addr
	Network Network
}

// ParseEgressTarget parses one allowOut or denyOut entry: an IP address
// or a CIDR prefix. An IP is the prefix of that one address.
func ParseEgressTarget(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
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

// Restricted reports whether the rules deny anything.
func (n Network) Restricted() bool {
	return len(n.DenyOut) > 0 || !n.AllowInternetAccess
}

// domainPattern normalises a domain entry: a host name of letters, digits
// and hyphens in dot-separated labels of 1 to 63 characters, at most 253
// in all, with at least two labels, optionally after "*.". It returns it
// lowercase without a trailing dot.
func domainPattern(s string) (string, bool) {
	d := strings.ToLower(strings.TrimSuffix(s, "."))
	host := strings.TrimPrefix(d, "*.")
	if host == "" || len(host) > 253 || !strings.Contains(host, ".") {
		return "", false
	}
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return "", false
			}
		}
	}
	return d, true
}
