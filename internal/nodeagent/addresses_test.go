package nodeagent

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The host's addresses of every interface, IPv4 and IPv6, but loopback,
// each once.
func TestInterfaceAddrs(t *testing.T) {
	cidr := func(s string) net.Addr {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return n
	}
	got := interfaceAddrs([]net.Addr{
		cidr("127.0.0.1/8"), cidr("::1/128"), cidr("192.0.2.2/24"), cidr("fd00::2/64"),
		cidr("fe80::fc:ff:fe00:1/64"), cidr("10.246.1.1/24"), cidr("10.246.1.1/24"),
		&net.IPAddr{IP: net.ParseIP("203.0.113.1")}, // not an interface's
		&net.IPNet{IP: net.IPv4(198, 51, 100, 7).To16(), Mask: net.CIDRMask(24, 32)},
	})
	want := []netip.Addr{netip.MustParseAddr("10.246.1.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("198.51.100.7"),
		netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fe80::fc:ff:fe00:1")}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("addresses (-want +got):\n%s", diff)
	}
}

// The control plane gets the host's addresses with the token, and no one
// gets them without.
func TestAddressesNeedTheToken(t *testing.T) {
	srv := newTestServer(t)
	srv.addrs = func() ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("2001:db8::2")}, nil
	}
	ts := tlsServer(t, srv)
	res, err := testClient.Get(ts.URL + "/v1/addresses")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d", res.StatusCode)
	}
	got, err := NewClient(token).Addresses(t.Context(), strings.TrimPrefix(ts.URL, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].String() != "192.0.2.2" || got[1].String() != "2001:db8::2" {
		t.Errorf("addresses %v", got)
	}
}

// The listing of the test's own host holds no loopback address.
func TestHostAddresses(t *testing.T) {
	got, err := hostAddresses()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range got {
		if a.IsLoopback() || !a.IsValid() {
			t.Errorf("address %v", a)
		}
	}
}
