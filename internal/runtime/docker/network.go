package docker

import (
	"context"
	"fmt"
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
	res, err := r.cli.NetworkInspect(ctx, r.cfg.Network, client.NetworkInspectOptions{})
	if err == nil {
		n := res.Network
		if n.Driver != "bridge" {
			return "", fmt.Errorf("docker network %q has driver %q; sandboxes need a bridge network (remove it or choose another name)", n.Name, n.Driver)
		}
		if name := n.Options[bridgeNameOption]; name != "" {
			return name, nil
		}
		return "br-" + n.ID[:12], nil // the bridge driver's default name
	}
	if sandbox.KindOf(classify(err, "")) != sandbox.KindNotFound {
		return "", classify(err, "cannot inspect the sandbox network")
	}
	opts := map[string]string{}
	if len(r.cfg.Network) <= 15 {
		opts[bridgeNameOption] = r.cfg.Network
	}
	noIPv6 := false
	created, err := r.cli.NetworkCreate(ctx, r.cfg.Network, client.NetworkCreateOptions{
		Driver:     "bridge",
		EnableIPv6: &noIPv6,
		Options:    opts,
		Labels:     map[string]string{LabelNetwork: r.cfg.ManagedValue},
	})
	if err != nil {
		return "", classify(err, "cannot create the sandbox network")
	}
	r.log.Info("created the sandbox network", "network", r.cfg.Network, "id", created.ID)
	if name := opts[bridgeNameOption]; name != "" {
		return name, nil
	}
	return "br-" + created.ID[:12], nil
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
