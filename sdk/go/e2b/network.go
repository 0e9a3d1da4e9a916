package e2b

import (
	"sort"
	"strconv"
	"strings"
	"unicode"
)

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
	// TransformFunc, when set, makes the rule's transform as the create or update is sent
	// (the JS SDK's transform callback): ids.Token(name) is the placeholder of the workload
	// identity token registered under name in SandboxOptions.IAM, which the egress gateway
	// replaces with a fresh token per request. At create, a name not registered fails the
	// call with an *InvalidArgumentError; an update carries no IAM, so its names are not
	// checked.
	TransformFunc func(ids *IdentityTokens) NetworkTransform `json:"-"`
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

// FillSecret is the placeholder of the secret name in a network rule's header value (the JS
// SDK's Secret.fill): the egress gateway puts the secret's current value there in every
// request, so the sandbox never sees it. It panics on a name that cannot be a placeholder
// (empty, or holding '{', '}' or a control character); CheckPlaceholderName says which.
func FillSecret(name string) string {
	if err := CheckPlaceholderName("secret", name); err != nil {
		panic(err)
	}
	return "${e2b.secrets." + name + "}"
}

// CheckPlaceholderName says whether name (of a secret, or of a workload identity token: kind)
// can be put into a placeholder: not empty, and no '{', '}' or control character, which would
// end it early or open another one.
func CheckPlaceholderName(kind, name string) error {
	if name == "" || strings.ContainsFunc(name, func(r rune) bool { return r == '{' || r == '}' || unicode.IsControl(r) }) {
		return invalidArg("%s name %s is not usable: it cannot be empty or contain '{', '}' or control characters, "+
			"since it is put into a placeholder the egress gateway resolves", kind, strconv.Quote(name))
	}
	return nil
}

// IdentityTokens hands a NetworkRule's TransformFunc the placeholders of the sandbox's
// workload identity tokens.
type IdentityTokens struct {
	registered map[string]IAMToken // nil: not checked (an update)
	err        error
}

// Token is the placeholder of the workload identity token registered under name.
func (ids *IdentityTokens) Token(name string) string {
	err := CheckPlaceholderName("iam token", name)
	if _, ok := ids.registered[name]; err == nil && ids.registered != nil && !ok {
		err = invalidArg("iam token %s is not registered in the sandbox's IAM options", strconv.Quote(name))
	}
	if err != nil && ids.err == nil {
		ids.err = err
	}
	return "${e2b.identity.tokens." + name + "}"
}

// resolveRules returns rules with every TransformFunc made into its transform, checking token
// names against registered when it is not nil (at create; an empty map when the sandbox
// registers none).
func resolveRules(rules map[string][]NetworkRule, registered map[string]IAMToken) (map[string][]NetworkRule, error) {
	out := make(map[string][]NetworkRule, len(rules))
	for host, list := range rules {
		resolved := make([]NetworkRule, len(list))
		for i, r := range list {
			if r.TransformFunc != nil {
				ids := &IdentityTokens{registered: registered}
				tr := r.TransformFunc(ids)
				if ids.err != nil {
					return nil, ids.err
				}
				r = NetworkRule{Transform: &tr}
			}
			resolved[i] = r
		}
		out[host] = resolved
	}
	return out, nil
}

// RuleHosts lists the hosts rules has rules for, sorted: AllowOut: RuleHosts(rules) lets a
// sandbox reach exactly those (the JS SDK's allowOut: ({ rules }) => [...rules.keys()]).
func RuleHosts(rules map[string][]NetworkRule) []string {
	hosts := make([]string, 0, len(rules))
	for h := range rules {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	return hosts
}
