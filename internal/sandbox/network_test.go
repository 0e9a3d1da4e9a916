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
		{"address with a dot", Network{AllowOut: []string{"10.0.0.1."}}, "network.allowOut entry '10.0.0.1.' is not an IP address, a CIDR or a domain name"},
		{"zone", Network{DenyOut: []string{"fe80::1%eth0"}}, "network.denyOut entry 'fe80::1%eth0' is not an IP address or a CIDR"},
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
	for in, want := range map[string]string{"1.2.3.4": "1.2.3.4/32", "10.1.2.3/8": "10.0.0.0/8", "::ffff:1.2.3.4": "1.2.3.4/32", "fe80::1": "fe80::1/128",
		"::ffff:10.1.0.0/112": "10.1.0.0/16", "::ffff:10.1.2.3/128": "10.1.2.3/32", "::ffff:0:0/95": "::fffe:0:0/95"} {
		p, err := ParseEgressTarget(in)
		if err != nil || p.String() != want {
			t.Errorf("ParseEgressTarget(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, bad := range []string{"fe80::1%eth0", "1.2.3.4/33", " 1.2.3.4", "10.0.0.1."} {
		if p, err := ParseEgressTarget(bad); err == nil {
			t.Errorf("ParseEgressTarget(%q) = %v, want an error", bad, p)
		}
	}
}

func TestNamesHost(t *testing.T) {
	ip := netip.MustParseAddr("172.18.0.5")
	for _, tt := range []struct {
		allowOut []string
		want     bool
	}{
		{[]string{"172.18.0.5"}, true},
		{[]string{"172.18.0.5/32"}, true},
		{[]string{"::ffff:172.18.0.5"}, true},
		{[]string{"example.com", "172.18.0.5"}, true},
		{[]string{"172.18.0.4/31"}, false},
		{[]string{"172.18.0.0/16"}, false},
		{[]string{"0.0.0.0/0"}, false},
		{[]string{"172.18.0.6"}, false},
		{nil, false},
	} {
		if got := (Network{AllowInternetAccess: true, AllowOut: tt.allowOut}).NamesHost(ip); got != tt.want {
			t.Errorf("allowOut %v: NamesHost(%v) = %v, want %v", tt.allowOut, ip, got, tt.want)
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

func TestNeighbours(t *testing.T) {
	ip := netip.MustParseAddr
	sb := func(addr, team string, allow ...string) Egress {
		return Egress{IP: ip(addr), TeamID: team, Network: Network{AllowOut: allow, AllowInternetAccess: true}}
	}
	all := map[string]Egress{
		"a":    sb("10.0.0.1", "t1", "10.0.0.2", "10.0.0.3/32", "10.0.0.4", "10.0.0.0/24", "10.0.0.1", "example.com"),
		"b":    sb("10.0.0.2", "t1"),
		"c":    sb("10.0.0.3", "t1", "::ffff:10.0.0.1"),
		"d":    sb("10.0.0.4", "t2"),
		"e":    sb("10.0.0.5", "", "10.0.0.6"),
		"f":    sb("10.0.0.6", ""),
		"none": {TeamID: "t1", Network: Network{AllowOut: []string{"10.0.0.1"}}},
	}
	want := []Neighbour{
		{From: "a", To: "b", FromIP: ip("10.0.0.1"), ToIP: ip("10.0.0.2")},
		{From: "a", To: "c", FromIP: ip("10.0.0.1"), ToIP: ip("10.0.0.3")},
		{From: "c", To: "a", FromIP: ip("10.0.0.3"), ToIP: ip("10.0.0.1")},
	}
	got := Neighbours(all)
	if len(got) != len(want) {
		t.Fatalf("Neighbours = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("pair %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
