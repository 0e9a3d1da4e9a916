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

// ValidateEgress checks a sandbox's allowOut and denyOut entries: each must
// be an IP address or a CIDR prefix. Domain names are refused rather than
// accepted and ignored, because resolving them once would not enforce them.
func (n Network) ValidateEgress() error {
	check := func(field string, entries []string) error {
		for _, e := range entries {
			if _, err := ParseEgressTarget(e); err == nil {
				continue
			}
			if looksLikeDomain(e) {
				return Errorf(KindInvalid, "network.%s entry '%s': domain rules are not supported yet; use an IP address or a CIDR", field, e)
			}
			return Errorf(KindInvalid, "network.%s entry '%s' is not an IP address or a CIDR", field, e)
		}
		return nil
	}
	if err := check("allowOut", n.AllowOut); err != nil {
		return err
	}
	return check("denyOut", n.DenyOut)
}

// looksLikeDomain reports whether s has the shape of a host name or a
// wildcard like *.example.com.
func looksLikeDomain(s string) bool {
	s = strings.TrimPrefix(s, "*.")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
