package e2b

// AllTraffic is the CIDR that stands for every address in AllowOut and DenyOut.
const AllTraffic = "0.0.0.0/0"

// NetworkOptions configures a sandbox's network at creation.
type NetworkOptions struct {
	// AllowOut lists the CIDRs, IPs and domains (also *.example.com) the sandbox may reach;
	// an allowed address wins over a denied one.
	AllowOut []string `json:"allowOut,omitempty"`
	// DenyOut lists the CIDRs and IPs the sandbox may not reach (AllTraffic: everything).
	DenyOut []string `json:"denyOut,omitempty"`
	// AllowPublicTraffic, when false, requires the sandbox's traffic access token on requests
	// to its ports (header e2b-traffic-access-token); nil leaves the default (true).
	AllowPublicTraffic *bool `json:"allowPublicTraffic,omitempty"`
	// MaskRequestHost is the Host header that servers in the sandbox see on proxied
	// requests; ${PORT} is replaced by the port.
	MaskRequestHost string `json:"maskRequestHost,omitempty"`
	// HTTPSPorts are ports whose traffic is HTTPS to the servers inside.
	HTTPSPorts []int `json:"httpsPorts,omitempty"`
	// EgressProxy sends the sandbox's outbound traffic through a SOCKS5 proxy.
	EgressProxy *EgressProxy `json:"egressProxy,omitempty"`
	// Rules transform requests to the hosts named by the keys.
	Rules map[string][]NetworkRule `json:"rules,omitempty"`
}

// NetworkInfo is a sandbox's network as GetInfo reports it.
type NetworkInfo = NetworkOptions

// EgressProxy is a SOCKS5 proxy for a sandbox's outbound traffic. The password is never
// reported back.
type EgressProxy struct {
	Address  string `json:"address"` // host:port
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// NetworkRule is one rule for requests to a host.
type NetworkRule struct {
	Transform *NetworkTransform `json:"transform,omitempty"`
}

// NetworkTransform changes requests on their way out: Headers are set on them.
type NetworkTransform struct {
	Headers map[string]string `json:"headers,omitempty"`
}

// NetworkUpdate replaces a running sandbox's egress rules (UpdateNetwork); a field left out is
// cleared.
type NetworkUpdate struct {
	AllowOut            []string                 `json:"allowOut,omitempty"`
	DenyOut             []string                 `json:"denyOut,omitempty"`
	Rules               map[string][]NetworkRule `json:"rules,omitempty"`
	EgressProxy         *EgressProxy             `json:"egressProxy,omitempty"`
	AllowInternetAccess *bool                    `json:"allow_internet_access,omitempty"`
}
