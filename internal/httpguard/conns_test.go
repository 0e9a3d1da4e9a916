package httpguard

import (
	"net"
	"testing"
)

func TestClientOf(t *testing.T) {
	for _, tc := range []struct {
		name, addr, want string
	}{
		{"ipv4", "192.0.2.7:4000", "192.0.2.7/32"},
		{"ipv4 in ipv6", "[::ffff:192.0.2.7]:4000", "192.0.2.7/32"},
		{"loopback", "127.0.0.1:1", "127.0.0.1/32"},
		{"ipv6 shares its /64", "[2001:db8:1:2:aaaa::1]:4000", "2001:db8:1:2::/64"},
		{"ipv6 loopback", "[::1]:4000", "::/64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := net.ResolveTCPAddr("tcp", tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			if got := clientOf(a).String(); got != tc.want {
				t.Errorf("clientOf(%s) = %s, want %s", tc.addr, got, tc.want)
			}
		})
	}
}
