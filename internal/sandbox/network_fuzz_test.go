package sandbox

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzEgressTarget feeds allowOut and denyOut entries, as clients send
// them, to the parsers the API and the firewall share. An entry the API
// accepts must mean one thing everywhere: a valid, masked prefix without
// a zone whose every spelling parses to it, that matches its own address
// however that address is written, and that names a neighbour sandbox
// only when it is one address.
func FuzzEgressTarget(f *testing.F) {
	for _, s := range []string{
		"1.2.3.4", "10.1.2.3/8", "0.0.0.0/0", "172.18.0.5/32", "::ffff:1.2.3.4", "::ffff:10.0.0.0/104",
		"fe80::1", "fe80::1%eth0", "2001:db8::/32", "::/0", "1.2.3.4/33", " 1.2.3.4", "example.com",
		"*.pypi.org.", "a.*.b.com", "*", "-x.example.com", "xn--bcher-kva.example", "1.2.3.4.example",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseEgressTarget(s)
		deny := Network{DenyOut: []string{s}}.ValidateEgress()
		if (err == nil) != (deny == nil) {
			t.Fatalf("ParseEgressTarget(%q) err=%v but denyOut validation err=%v", s, err, deny)
		}
		allow := Network{AllowOut: []string{s}}
		if err != nil {
			if allow.ValidateEgress() != nil {
				return
			}
			d, ok := domainPattern(s)
			if !ok || len(allow.Domains()) != 1 || allow.Domains()[0] != d {
				t.Fatalf("allowOut %q is valid but not a domain: %v", s, allow.Domains())
			}
			if host, wild := strings.CutPrefix(d, "*."); wild {
				if allow.AllowedDomain(host) || !allow.AllowedDomain("x."+host) {
					t.Fatalf("wildcard %q: AllowedDomain(%q)=%v, AllowedDomain(x.%s)=%v", s, host, allow.AllowedDomain(host), host, allow.AllowedDomain("x."+host))
				}
			} else if !allow.AllowedDomain(strings.ToUpper(d) + ".") {
				t.Fatalf("domain %q does not allow itself", s)
			}
			if _, perr := netip.ParseAddr(strings.TrimPrefix(d, "*.")); perr == nil {
				t.Fatalf("address %q taken for a domain", s)
			}
			return
		}
		if allow.ValidateEgress() != nil || len(allow.Domains()) != 0 {
			t.Fatalf("target %q is not a valid allowOut entry, or taken for a domain", s)
		}
		a := p.Addr()
		switch {
		case !p.IsValid() || p != p.Masked():
			t.Fatalf("ParseEgressTarget(%q) = %v, not a valid masked prefix", s, p)
		case a.Zone() != "":
			t.Fatalf("ParseEgressTarget(%q) = %v keeps a zone", s, p)
		case a.Is4In6():
			t.Fatalf("ParseEgressTarget(%q) = %v: IPv4 left in IPv6 form", s, p)
		}
		if again, err := ParseEgressTarget(p.String()); err != nil || again != p {
			t.Fatalf("ParseEgressTarget(%q) = %v, but its string parses to %v, %v", s, p, again, err)
		}
		spellings := []netip.Addr{a}
		if a.Is4() {
			spellings = append(spellings, netip.AddrFrom16(a.As16()))
		}
		for _, sp := range spellings {
			if !allow.AllowsAddr(sp) {
				t.Fatalf("allowOut %q does not allow %v, its own address", s, sp)
			}
			if (Network{AllowInternetAccess: true, DenyOut: []string{s}}).AllowsAddr(sp) {
				t.Fatalf("denyOut %q allows %v, its own address", s, sp)
			}
			if allow.NamesHost(sp) != p.IsSingleIP() {
				t.Fatalf("allowOut %q: NamesHost(%v) = %v for a prefix of %d bits", s, sp, allow.NamesHost(sp), p.Bits())
			}
		}
	})
}
