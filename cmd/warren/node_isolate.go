package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"

	"github.com/warrenhq/warren/internal/podnet"
)

const isolateUsage = `isolate installs the rules that keep a sandbox's pod from the cluster (package
podnet), then copies the agent to --install-agent: run by the init container of
every sandbox pod, with CAP_NET_ADMIN, in the pod's own network namespace. The
networks of podnet.DefaultRefused and of --refuse are refused in both directions
but for the agent's port, DNS passes to the resolvers of --resolv-conf. It fails
when it cannot, and then the pod never starts its agent.

--reaches and --reached-by open the same-team neighbours the control plane
picked: the pod may send anything to the first and take connections on any
port from the second. Run again (an ephemeral container of the running pod,
without --install-agent), it replaces the pod's rules whole.

--backend nftables programs the kernel's nftables; iptables gVisor's netstack,
which has only iptables (it takes CAP_NET_RAW too, and runsc's net-raw option);
auto tries nftables, then iptables where the kernel has no nftables.`

// runIsolate is `warren node isolate`.
func (m *Main) runIsolate(_ context.Context, args []string) error {
	fs := m.newFlagSet("node isolate", "warren node isolate [flags]", isolateUsage)
	var refuse, resolvConf, agentDest, backend, reaches, reachedBy string
	var agentPort int
	fs.StringVar(&refuse, "refuse", "", "comma-separated networks (CIDRs or addresses) refused beside the defaults: the cluster's own")
	fs.StringVar(&resolvConf, "resolv-conf", "/etc/resolv.conf", "the pod's resolv.conf, whose nameservers get DNS")
	fs.IntVar(&agentPort, "agent-port", 0, "the only TCP port that takes connections from outside the pod (0: none)")
	fs.StringVar(&reaches, "reaches", "", "comma-separated addresses the pod may send anything to: the neighbours it reaches")
	fs.StringVar(&reachedBy, "reached-by", "", "comma-separated addresses that may connect to any of the pod's ports: the neighbours that reach it")
	fs.StringVar(&backend, "backend", "auto", "nftables, iptables (gVisor's netstack) or auto")
	fs.StringVar(&agentDest, "install-agent", "", "once isolated, copy the warren-agent beside this binary there (\"\": do not)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if agentPort < 0 || agentPort > 65535 {
		return usageError{fmt.Sprintf("--agent-port=%d: want a port", agentPort)}
	}
	if backend != "auto" && backend != "nftables" && backend != "iptables" {
		return usageError{fmt.Sprintf("--backend=%s: want nftables, iptables or auto", backend)}
	}
	rules := podnet.Rules{Refuse: podnet.DefaultRefused(), AgentPort: uint16(agentPort)}
	for _, s := range strings.Split(refuse, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := parseNetwork(s)
		if err != nil {
			return usageError{fmt.Sprintf("--refuse: %q is not a CIDR or an address", s)}
		}
		rules.Refuse = append(rules.Refuse, p)
	}
	var err error
	if rules.Reaches, err = parseAddrs("--reaches", reaches); err != nil {
		return err
	}
	if rules.ReachedBy, err = parseAddrs("--reached-by", reachedBy); err != nil {
		return err
	}
	b, err := os.ReadFile(resolvConf)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("--resolv-conf: %w", err)
	}
	rules.Resolvers = podnet.Nameservers(b)
	used, err := applyRules(rules, backend)
	if err != nil {
		return fmt.Errorf("cannot isolate the sandbox's pod, so it does not start: %w", err)
	}
	fmt.Fprintf(m.Stdout, "isolated with %s: %d networks refused, DNS to %v, agent port %d, reaches %v, reached by %v\n",
		used, len(rules.Refuse), rules.Resolvers, agentPort, rules.Reaches, rules.ReachedBy)
	if agentDest == "" {
		return nil
	}
	return installAgent(agentDest)
}

// applyRules installs rules with backend, or with auto the first the
// kernel has, and returns the one used.
func applyRules(rules podnet.Rules, backend string) (string, error) {
	if backend != "iptables" {
		err := podnet.Apply(rules)
		if err == nil || backend == "nftables" || !errors.Is(err, syscall.EPROTONOSUPPORT) {
			return "nftables", err
		}
	}
	if err := podnet.ApplyIPTables(rules); err != nil {
		if errors.Is(err, podnet.ErrNoIPTables) {
			err = fmt.Errorf("%w (under gVisor, the RuntimeClass's runsc must run with net-raw = \"true\" in its runsc_config, and this container needs CAP_NET_RAW beside CAP_NET_ADMIN)", err)
		}
		return "iptables", err
	}
	return "iptables", nil
}

// parseNetwork reads a CIDR or a single address.
func parseNetwork(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap().WithZone("")
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	return p.Masked(), err
}

// parseAddrs reads a flag's comma-separated addresses.
func parseAddrs(flag, s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil || a.Zone() != "" {
			return nil, usageError{fmt.Sprintf("%s: %q is not an address", flag, f)}
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}
