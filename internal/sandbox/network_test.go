package sandbox

import (
	"net/netip"
	"testing"
)

func TestValidateEgress(t *testing.T) {
	tests := []struct {
		name    string
		n       Network
		wantErr string // "" = valid
	}{
		{"empty", Network{}, ""},
		{"ips and cidrs", Network{AllowOut: []string{"1.2.3.4", "10.0.0.0/8", "::1", "2001:db8::/32"}, DenyOut: []string{"0.0.0.0/0"}}, ""},
		{"domains", Network{AllowOut: []string{"example.com", "*.Example.org.", "a-b.c0.io"}, DenyOut: []string{"0.0.0.0/0"}}, ""},
		{"domain in denyOut", Network{DenyOut: []string{"example.com"}}, "network.denyOut entry 'example.com': only IP addresses and CIDRs can be denied; deny all (0.0.0.0/0) and allow the domains you want in allowOut"},
		{"single label", Network{AllowOut: []string{"localhost"}}, "network.allowOut entry 'localhost' is not an IP address, a CIDR or a domain name"},
		{"bad label", Network{AllowOut: []string{"-x.example.com"}}, "network.allowOut entry '-x.example.com' is not an IP address, a CIDR or a domain name"},
		{"inner wildcard", Network{AllowOut: []string{"a.*.example.com"}}, "network.allowOut entry 'a.*.example.com' is not an IP address, a CIDR or a domain name"},
		{"bare wildcard", Network{AllowOut: []string{"*"}}, "network.allowOut entry '*' is not an IP address, a CIDR or a domain name"},
		{"garbage", Network{DenyOut: []string{"1.2.3.4/99"}}, "network.denyOut entry '1.2.3.4/99' is not an IP address or a CIDR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.n.ValidateEgress()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateEgress: %v", err)
				}
				return
			}
			if KindOf(err) != KindInvalid || Message(err) != tt.wantErr {
				t.Fatalf("ValidateEgress = %v, want invalid %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseEgressTarget(t *testing.T) {
	for in, want := range map[string]string{"1.2.3.4": "1.2.3.4/32", "10.1.2.3/8": "10.0.0.0/8", "::ffff:1.2.3.4": "1.2.3.4/32", "fe80::1": "fe80::1/128"} {
		p, err := ParseEgressTarget(in)
		if err != nil || p.String() != want {
			t.Errorf("ParseEgressTarget(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
}

func TestAllowedDomain(t *testing.T) {
	n := Network{AllowOut: []string{"10.0.0.0/8", "Example.com", "*.pypi.org."}}
	for name, want := range map[string]bool{
		"example.com": true, "EXAMPLE.com.": true, "www.example.com": false, "example.com.evil.io": false,
		"files.pypi.org": true, "a.b.pypi.org": true, "pypi.org": false, "xpypi.org": false, "": false, ".": false,
	} {
		if got := n.AllowedDomain(name); got != want {
			t.Errorf("AllowedDomain(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestAllowsAddr(t *testing.T) {
	n := Network{AllowInternetAccess: true, AllowOut: []string{"10.1.0.0/16"}, DenyOut: []string{"10.0.0.0/8"}}
	for addr, want := range map[string]bool{"10.1.2.3": true, "10.2.0.1": false, "1.1.1.1": true, "::ffff:10.2.0.1": false} {
		if got := n.AllowsAddr(netip.MustParseAddr(addr)); got != want {
			t.Errorf("AllowsAddr(%s) = %v, want %v", addr, got, want)
		}
	}
	closed := Network{AllowOut: []string{"192.0.2.1"}}
	if closed.AllowsAddr(netip.MustParseAddr("1.1.1.1")) || !closed.AllowsAddr(netip.MustParseAddr("192.0.2.1")) {
		t.Error("without internet access only allowOut is reachable")
	}
}
