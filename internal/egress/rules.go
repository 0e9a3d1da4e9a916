package egress

import (
	"net/netip"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
)

// ruleSet picks the rules of a connection to dst for name, the TLS server
// name or HTTP host it names ("" when none): the rules of name itself,
// else of the longest wildcard "*.suffix" it is under, else of dst's
// address, else of the narrowest CIDR holding it. Sets are never merged:
// one key's list applies, in its order. An IP-literal name counts as no
// name (the address is dst's).
func ruleSet(rules map[string][]sandbox.NetworkRule, name string, dst netip.Addr) (string, []sandbox.NetworkRule) {
	if len(rules) == 0 {
		return "", nil
	}
	name = normalName(name)
	if _, err := netip.ParseAddr(name); err == nil {
		name = ""
	}
	if name != "" {
		if key, ok := nameRule(rules, name); ok {
			return key, rules[key]
		}
	}
	dst = dst.Unmap()
	best, bestBits := "", -1
	for key := range rules {
		if strings.Contains(key, "*") {
			continue
		}
		p, err := sandbox.ParseEgressTarget(key)
		if err != nil || !p.Contains(dst) {
			continue
		}
		if p.Bits() > bestBits || p.Bits() == bestBits && key < best {
			best, bestBits = key, p.Bits()
		}
	}
	if bestBits < 0 {
		return "", nil
	}
	return best, rules[best]
}

// nameRule finds the key of rules for name: name itself, else the longest
// wildcard it is strictly under. Keys match whatever their case.
func nameRule(rules map[string][]sandbox.NetworkRule, name string) (string, bool) {
	best, bestLen := "", 0
	for key := range rules {
		k := normalName(key)
		if k == name {
			return key, true
		}
		suffix, ok := strings.CutPrefix(k, "*")
		if !ok || !strings.HasPrefix(suffix, ".") || len(name) <= len(suffix) || !strings.HasSuffix(name, suffix) {
			continue
		}
		if len(suffix) > bestLen || len(suffix) == bestLen && key < best {
			best, bestLen = key, len(suffix)
		}
	}
	return best, best != ""
}

// hasNameRule reports whether some rule is keyed by name or a wildcard
// over it.
func hasNameRule(rules map[string][]sandbox.NetworkRule, name string) bool {
	if len(rules) == 0 {
		return false
	}
	_, ok := nameRule(rules, normalName(name))
	return ok
}

// hasNameRules reports whether some rule is keyed by a name rather than
// an address: the sandbox's DNS must then come to the forwarder, which
// remembers where those names led.
func hasNameRules(rules map[string][]sandbox.NetworkRule) bool {
	for key := range rules {
		if _, err := sandbox.ParseEgressTarget(key); err != nil {
			return true
		}
	}
	return false
}

func normalName(s string) string { return strings.ToLower(strings.TrimSuffix(s, ".")) }

// Intercepts reports whether all of a sandbox's TCP must go through the
// gateway: it has header rules, or an egress proxy.
func Intercepts(n sandbox.Network) bool {
	return len(n.Rules) > 0 || n.EgressProxy != nil
}

// NeedsDNS reports whether a sandbox's DNS must come to the forwarder for
// its rules: one is keyed by a name, and plain HTTP gets it only where the
// forwarder led that name.
func NeedsDNS(n sandbox.Network) bool { return hasNameRules(n.Rules) }
