package firewall

import (
	"cmp"
	"context"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Off is the sandbox.Firewall of a server started without a firewall: it
// installs nothing and refuses the egress settings it cannot enforce, so
// that a client asking for a closed sandbox never gets an open one.
type Off struct {
	// Why says why the server has no firewall, in every refusal; "" is
	// "it runs with --firewall=off".
	Why string
}

var _ sandbox.Firewall = Off{}

// Apply refuses settings that restrict egress or go through the gateway.
func (o Off) Apply(_ context.Context, _ string, e sandbox.Egress) error {
	why := cmp.Or(o.Why, "it runs with --firewall=off")
	if n := e.Network; !n.AllowInternetAccess || len(n.DenyOut) > 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "egress rules are not enforced on this server (%s); omit allow_internet_access=false and network.denyOut", why)
	}
	if n := e.Network; len(n.Rules) > 0 || n.EgressProxy != nil {
		return sandbox.Errorf(sandbox.KindInvalid, "network.rules and network.egressProxy need the egress gateway, which this server does not run (%s); omit them", why)
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
