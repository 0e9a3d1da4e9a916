package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/warrenhq/warren/internal/egress"
	"github.com/warrenhq/warren/internal/firewall"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/server"
)

// checkDocker validates the settings of --engine docker.
func checkDocker(cfg serveConfig) error {
	if cfg.Kube.Registry != "" {
		return usageError{"--registry is for --engine kubernetes: the Docker engine runs the images it builds"}
	}
	return nil
}

// openDocker runs sandboxes as containers on the local Docker engine,
// behind the host's firewall, which also guards template builds.
func openDocker(ctx context.Context, cfg serveConfig, log *slog.Logger) (_ server.Deps, _ func(), err error) {
	var u undo
	defer func() {
		if err != nil {
			u.run()
		}
	}()
	resolv, err := gvisorResolvConf(cfg.StateDir, cfg.EgressDNS, log)
	if err != nil {
		return server.Deps{}, nil, err
	}
	dc := dockerConfig(cfg, log)
	dc.GVisorRuntime, dc.GVisorResolvConf = cfg.GVisorName, resolv
	d, err := openLocalDocker(dc, "run \"warren doctor\"", &u)
	if err != nil {
		return server.Deps{}, nil, err
	}
	if err := d.rt.CheckRuntime(ctx, cfg.Lifecycle.SandboxRuntime); err != nil {
		return server.Deps{}, nil, fmt.Errorf("--runtime=%s: %w", cfg.Lifecycle.SandboxRuntime, err)
	}
	if err := d.ensureBuildNetwork(ctx); err != nil {
		return server.Deps{}, nil, err
	}
	fw, caPEM, err := newHostFirewall(ctx, cfg, d, log)
	if err != nil {
		return server.Deps{}, nil, err
	}
	u.push(func() { fw.Close() }) // stops the egress server; the rules stay
	deps := agentDeps(log)
	deps.Runtime, deps.Firewall, deps.CABundle, deps.Builder = d.rt, fw, caPEM, d.rt.Builder(d.buildNet)
	return deps, u.run, nil
}

// gvisorResolvConf writes the resolv.conf of gVisor sandboxes into the
// state dir (see docker.Config.GVisorResolvConf): the host's nameservers
// that a sandbox can reach, that is not loopback ones, else those of
// --egress-dns on port 53. It returns "" and warns when there is none.
func gvisorResolvConf(stateDir string, egressDNS []string, log *slog.Logger) (string, error) {
	var servers []netip.Addr
	host, _ := egress.Nameservers("/etc/resolv.conf")
	for _, u := range egressDNS {
		if ap := netip.MustParseAddrPort(u); ap.Port() == 53 {
			host = append(host, ap.Addr())
		}
	}
	for _, a := range host {
		if !a.IsLoopback() && !slices.Contains(servers, a) {
			servers = append(servers, a)
		}
	}
	if len(servers) == 0 {
		log.Warn("gVisor sandboxes will resolve no names: the host's resolvers are loopback addresses they cannot reach; name reachable ones with --egress-dns IP:53")
		return "", nil
	}
	var b strings.Builder
	b.WriteString("# Written by warren serve for gVisor sandboxes.\n")
	for _, a := range servers {
		b.WriteString("nameserver " + a.String() + "\n")
	}
	path := filepath.Join(stateDir, "gvisor-resolv.conf")
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", fmt.Errorf("state dir: %w", err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// hostFirewall is a firewall that runs on the host beside the server:
// firewall.Firewall, whose Close stops its egress server, or firewall.Off.
type hostFirewall interface {
	sandbox.Firewall
	io.Closer
}

// newHostFirewall makes the sandbox network of the local Docker engine d
// and the firewall guarding it and the template builds' bridge; the
// manager installs the rules when it starts.
func newHostFirewall(ctx context.Context, cfg serveConfig, d localDocker, log *slog.Logger) (hostFirewall, string, error) {
	if cfg.Firewall == "off" {
		log.Warn("firewall off: sandboxes can reach the host and each other, and egress rules are refused")
		return firewall.Off{}, "", nil
	}
	bridge, err := d.rt.EnsureNetwork(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("sandbox network: %w (run \"warren doctor\")", err)
	}
	ca, roots, err := egressTLS(cfg.StateDir, cfg.EgressTrustCA)
	if err != nil {
		return nil, "", err
	}
	fw, err := firewall.New(ctx, firewall.Config{Bridge: bridge, BuildBridge: d.buildBridge, Instance: cfg.Instance, DNSUpstream: cfg.EgressDNS, Logger: log,
		Authority: ca, RootCAs: roots, PublicProxiesOnly: !cfg.EgressProxyPrivate})
	if err != nil {
		return nil, "", fmt.Errorf("%w; to run without isolation, start with --firewall=off", err)
	}
	return fw, string(ca.CertPEM()), nil
}
