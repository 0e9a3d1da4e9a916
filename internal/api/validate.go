package api

import (
	"context"
	"net"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Limits E2B's API states for request fields that the lifecycle manager
// does not check itself (it checks timeouts and allowOut/denyOut).
const (
	maxHTTPSPorts       = 128 // SandboxNetworkConfig.httpsPorts
	maxProxyCredentials = 255 // egressProxy username and password, in bytes (RFC 1929)
)

// validate checks a create body against the limits E2B states.
func (req newSandboxJSON) validate(v2 bool) error {
	if v2 && req.Secure != nil && !*req.Secure {
		return sandbox.Errorf(sandbox.KindInvalid, "secure false is not available on /v2/sandboxes: every sandbox it creates is secured")
	}
	if req.Network != nil {
		if err := req.Network.validate(); err != nil {
			return err
		}
		secure := v2 || (req.Secure != nil && *req.Secure)
		if n := req.Network; n.AllowPublicTraffic != nil && !*n.AllowPublicTraffic && !secure {
			return sandbox.Errorf(sandbox.KindInvalid, "network.allowPublicTraffic false needs a secure sandbox (secure: true)")
		}
	}
	// The agent gives these to every command; a name with '=' would
	// become another variable, and exec refuses NULs.
	for k, v := range req.EnvVars {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return sandbox.Errorf(sandbox.KindInvalid, "envVars: invalid name %q (a name is not empty and has no '=' or NUL)", k)
		}
		if strings.ContainsRune(v, 0) {
			return sandbox.Errorf(sandbox.KindInvalid, "envVars: the value of %q contains a NUL byte", k)
		}
	}
	if err := iamIn(req.IAM).Validate(); err != nil {
		return err
	}
	autoPause := req.AutoPause != nil && *req.AutoPause
	keepMemory := req.AutoPauseMemory == nil || *req.AutoPauseMemory
	if autoPause && !keepMemory && req.AutoResume != nil && req.AutoResume.Enabled {
		return sandbox.Errorf(sandbox.KindInvalid,
			"autoResume cannot be combined with autoPauseMemory false: a sandbox paused without its memory must be resumed explicitly (connect)")
	}
	return nil
}

// validate checks network settings, on create and on PUT network.
func (n *networkJSON) validate() error {
	if len(n.HTTPSPorts) > maxHTTPSPorts {
		return sandbox.Errorf(sandbox.KindInvalid, "network.httpsPorts has %d ports; at most %d are allowed", len(n.HTTPSPorts), maxHTTPSPorts)
	}
	for _, p := range n.HTTPSPorts {
		if p < 1 || p > 65535 {
			return sandbox.Errorf(sandbox.KindInvalid, "network.httpsPorts: %d is not a port (1-65535)", p)
		}
		if p == sandbox.AgentPort {
			return sandbox.Errorf(sandbox.KindInvalid, "network.httpsPorts cannot list the envd port %d", sandbox.AgentPort)
		}
	}
	if n.MaskRequestHost != "" {
		if err := sandbox.ValidateMaskRequestHost(n.MaskRequestHost); err != nil {
			return err
		}
	}
	if px := n.EgressProxy; px != nil {
		host, port, err := net.SplitHostPort(px.Address)
		if num, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil || host == "" || num == 0 {
			return sandbox.Errorf(sandbox.KindInvalid, "network.egressProxy.address '%s' is not host:port", px.Address)
		}
		if len(px.Username) > maxProxyCredentials || len(px.Password) > maxProxyCredentials {
			return sandbox.Errorf(sandbox.KindInvalid, "network.egressProxy username and password are at most %d bytes each", maxProxyCredentials)
		}
	}
	return nil
}

// validateUpdate refuses the settings E2B's network update does not
// carry (SandboxNetworkUpdateConfig): they are fixed when the sandbox is
// created, and a PUT that named them would otherwise change nothing.
func (n *networkJSON) validateUpdate() error {
	fixed := func(field string) error {
		return sandbox.Errorf(sandbox.KindInvalid,
			"network.%s cannot be changed by a network update: it is fixed when the sandbox is created (an update carries allowOut, denyOut, egressProxy, rules and allow_internet_access)", field)
	}
	switch {
	case n.AllowPublicTraffic != nil:
		return fixed("allowPublicTraffic")
	case n.MaskRequestHost != "":
		return fixed("maskRequestHost")
	case n.HTTPSPorts != nil:
		return fixed("httpsPorts")
	}
	return n.validate()
}

// networkRules puts n's rules in normal form and checks that each of
// their placeholders can resolve for a sandbox of team with iam: on
// create with the request's iam, on PUT network with the sandbox's.
func (s *server) networkRules(ctx context.Context, team string, n *sandbox.Network, iam sandbox.IAM) error {
	rules, err := sandbox.NormalizeRules(n.Rules)
	if err != nil {
		return err
	}
	if s.secrets != nil {
		err = s.secrets.CheckRules(ctx, team, rules, iam)
	} else if err = sandbox.CheckTokens(rules, iam); err == nil {
		for _, p := range sandbox.RulePlaceholders(rules) {
			if p.Kind == sandbox.PlaceholderSecret {
				return sandbox.Errorf(sandbox.KindInvalid, "network.rules: placeholder %s names a secret, but this server has no secrets", p.Text)
			}
		}
	}
	if err != nil {
		return err
	}
	n.Rules = rules
	return nil
}
