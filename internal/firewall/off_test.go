package firewall

import (
	"context"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

// TestOffRefusesWhatItCannotEnforce: without a firewall there is no egress
// gateway, so closed networks, header rules and egress proxies are
// refused rather than silently not applied.
func TestOffRefusesWhatItCannotEnforce(t *testing.T) {
	open := sandbox.Network{AllowInternetAccess: true}
	if err := (Off{}).Apply(context.Background(), "sb", sandbox.Egress{Network: open}); err != nil {
		t.Errorf("an open network: %v", err)
	}
	rules := open
	rules.Rules = map[string][]sandbox.NetworkRule{"api.example.com": {{Headers: map[string]string{"A": "b"}}}}
	proxy := open
	proxy.EgressProxy = &sandbox.EgressProxy{Address: "127.0.0.1:1080"}
	for what, n := range map[string]sandbox.Network{
		"no internet": {}, "denyOut": {AllowInternetAccess: true, DenyOut: []string{"10.0.0.0/8"}},
		"rules": rules, "egressProxy": proxy,
	} {
		if err := (Off{}).Apply(context.Background(), "sb", sandbox.Egress{Network: n}); sandbox.KindOf(err) != sandbox.KindInvalid {
			t.Errorf("%s: %v, want an invalid-argument error", what, err)
		}
	}
}

// TestOffSaysWhy: a refusal says why the server has no firewall.
func TestOffSaysWhy(t *testing.T) {
	closed := sandbox.Egress{Network: sandbox.Network{}}
	if err := (Off{}).Apply(context.Background(), "sb", closed); err == nil || !strings.Contains(err.Error(), "--firewall=off") {
		t.Errorf("without a reason: %v, want it to name --firewall=off", err)
	}
	const why = "the cluster's network policy decides"
	if err := (Off{Why: why}).Apply(context.Background(), "sb", closed); err == nil || !strings.Contains(err.Error(), why) || strings.Contains(err.Error(), "--firewall") {
		t.Errorf("with a reason: %v, want it to say %q only", err, why)
	}
}
