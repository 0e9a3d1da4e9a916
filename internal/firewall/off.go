package firewall

import (
	"context"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Off is the sandbox.Firewall of a server started without a firewall: it
// installs nothing and refuses the egress settings it cannot enforce, so
// that a client asking for a closed sandbox never gets an open one.
type Off struct{}

var _ sandbox.Firewall = Off{}

// Apply refuses settings that restrict egress or go through the gateway.
func (Off) Apply(_ context.Context, _ string, e sandbox.Egress) error {
	if n := e.Network; !n.AllowInternetAccess || len(n.DenyOut) > 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "egress rules are not enforced on this server (it runs with --firewall=off); omit allow_internet_access=false and network.denyOut")
	}
	if n := e.Network; len(n.Rules) > 0 || n.EgressProxy != nil {
		return sandbox.Errorf(sandbox.KindInvalid, "network.rules and network.egressProxy need the egress gateway, which this server does not run (it runs with --firewall=off); omit them")
	}
	return nil
}

// Remove does nothing.
func (Off) Remove(context.Context, string) error { return nil }

// Sync does nothing.
func (Off) Sync(context.Context, map[string]sandbox.Egress) error { return nil }

// Restore does nothing.
func (Off) Restore(context.Context) error { return nil }

// Uninstall does nothing.
func (Off) Uninstall(context.Context) error { return nil }

// Close does nothing: Off runs no egress server.
func (Off) Close() error { return nil }
