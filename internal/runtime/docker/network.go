package docker

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

// LabelNetwork marks the Docker network Warren created for its sandboxes.
const LabelNetwork = "dev.warren.network"

// bridgeNameOption is the bridge driver's option naming the host interface.
const bridgeNameOption = "com.docker.network.bridge.name"

// EnsureNetwork creates the sandbox network (Config.Network) unless it
// exists, and returns the name of its host bridge interface, which the
// firewall filters on. Warren's network is a labelled bridge without IPv6
// whose interface has the network's name when that fits (15 characters);
// it survives restarts of the server and the engine.
func (r *Runtime) EnsureNetwork(ctx context.Context) (string, error) {
	return r.ensureBridge(ctx, r.cfg.Network, "sandbox")
}

// EnsureBuildNetwork creates the network template builds run on
// (Config.BuildNetwork) unless it exists, and returns its name and its
// bridge interface's. It is a bridge like the sandbox network, and apart
// from it: the builder gives a build's steps capabilities no sandbox has
// (NET_RAW among them), which on the sandboxes' bridge could forge their
// addresses; on a bridge of their own the firewall (Config.BuildBridge)
// refuses their packets by interface, whatever address they claim.
func (r *Runtime) EnsureBuildNetwork(ctx context.Context) (network, bridge string, err error) {
	bridge, err = r.ensureBridge(ctx, r.cfg.BuildNetwork, "template build")
	return r.cfg.BuildNetwork, bridge, err
}

// ensureBridge makes the bridge network name unless it exists, and
// returns its interface's name; what names it in messages.
func (r *Runtime) ensureBridge(ctx context.Context, name, what string) (string, error) {
	res, err := r.cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if err == nil {
		return bridgeOf(res.Network, what)
	}
	if sandbox.KindOf(classify(err, "")) != sandbox.KindNotFound {
		return "", classify(err, "cannot inspect the "+what+" network")
	}
	opts := map[string]string{}
	if len(name) <= 15 {
		if err := bridgeNameFree(name, what); err != nil {
			return "", err
		}
		opts[bridgeNameOption] = name
	}
	noIPv6 := false
	created, err := r.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{
		Driver:     "bridge",
		EnableIPv6: &noIPv6,
		Options:    opts,
		Labels:     map[string]string{LabelNetwork: r.cfg.Instance},
	})
	if err != nil {
		if res, ierr := r.cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{}); ierr == nil {
			return bridgeOf(res.Network, what) // another server made it meanwhile
		}
		return "", classify(err, "cannot create the "+what+" network")
	}
	r.log.Info("created the "+what+" network", "network", name, "id", created.ID)
	if bridge := opts[bridgeNameOption]; bridge != "" {
		return bridge, nil
	}
	return "br-" + created.ID[:12], nil
}

// bridgeNameFree refuses to name a new network's bridge after a host
// interface that exists: this engine has no such network, so the
// interface is another's, most likely another Docker engine's network of
// the same name on this host. The bridge driver would take it over and
// readdress it, and cut that network's containers off.
func bridgeNameFree(name, what string) error {
	if _, err := net.InterfaceByName(name); err == nil {
		return fmt.Errorf("cannot create the %s network %q: a host interface of that name exists, which is not this engine's "+
			"(another Docker engine's network on this host?); choose another network name (warren serve --network)", what, name)
	}
	return nil
}

// bridgeOf is the interface of a bridge network.
func bridgeOf(n network.Inspect, what string) (string, error) {
	if n.Driver != "bridge" {
		return "", fmt.Errorf("docker network %q has driver %q; the %s network must be a bridge (remove it or choose another name)", n.Name, n.Driver, what)
	}
	if bridge := n.Options[bridgeNameOption]; bridge != "" {
		return bridge, nil
	}
	return "br-" + n.ID[:12], nil // the bridge driver's default name
}

// ensureNetworkOnce runs EnsureNetwork on the first Create.
func (r *Runtime) ensureNetworkOnce(ctx context.Context) error {
	r.mu.Lock()
	ok := r.networkOK
	r.mu.Unlock()
	if ok {
		return nil
	}
	if _, err := r.EnsureNetwork(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	r.networkOK = true
	r.mu.Unlock()
	return nil
}

// containerIP is a container's address on the sandbox network, given its
// networks; invalid when it has none (stopped, or attached elsewhere).
func (r *Runtime) containerIP(nets map[string]*network.EndpointSettings) netip.Addr {
	if ep := nets[r.cfg.Network]; ep != nil {
		return ep.IPAddress
	}
	return netip.Addr{}
}
