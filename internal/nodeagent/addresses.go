package nodeagent

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"slices"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Addresses are the addresses the node agent's host holds, as
// GET /v1/addresses answers them.
type Addresses struct {
	Addresses []netip.Addr `json:"addresses"`
}

// hostAddresses returns the addresses of every interface of the agent's
// network namespace (the node's: hostNetwork), IPv4 and IPv6, but
// loopback: an address a pod reaches as its node's though no Node object
// lists it (a second interface, a bridge, a VPN). Link-local ones are
// left in; the control plane drops those its defaults refuse anyway.
func hostAddresses() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "cannot list the node's addresses")
	}
	return interfaceAddrs(addrs), nil
}

// interfaceAddrs returns the addresses of addrs (*net.IPNet, as
// net.InterfaceAddrs gives them) but loopback, sorted and without
// duplicates.
func interfaceAddrs(addrs []net.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok || ip.Unmap().IsLoopback() {
			continue
		}
		out = append(out, ip.Unmap())
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// serveAddresses adds GET /v1/addresses: the control plane refuses them
// to every sandbox pod (internal/runtime/kubernetes, isolation.go).
func (s *Server) serveAddresses() {
	s.mux.HandleFunc("GET /v1/addresses", s.authed(func(http.ResponseWriter, *http.Request) (any, error) {
		a, err := s.addrs()
		return Addresses{Addresses: a}, err
	}))
}

// Addresses returns the addresses of the host of the node agent at addr.
func (c *Client) Addresses(ctx context.Context, addr string) ([]netip.Addr, error) {
	var out Addresses
	err := c.call(ctx, c.http, http.MethodGet, addr, "/v1/addresses", nil, nil, &out)
	return out.Addresses, err
}
