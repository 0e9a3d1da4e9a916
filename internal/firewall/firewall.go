// Package firewall isolates sandboxes on the host and enforces their
// egress rules with iptables (and ip6tables), implementing
// sandbox.Firewall.
//
// For one server (instance) on one bridge, the sandbox network's host
// interface, it owns two chains per address family: an input chain,
// jumped to from INPUT, and a forward chain, jumped to from the engine's
// DOCKER-USER chain (or FORWARD when there is none), both for packets
// arriving from the bridge. The input chain refuses everything a sandbox
// sends to the host except replies, so no host port (the server's own,
// the engine's, any other service) is reachable through the bridge
// gateway or any other host address. The forward chain refuses another
// sandbox's agent port and link-local addresses (cloud metadata), then
// keeps sandboxes apart: none reaches another's address unless both are
// of the same team and its allowOut names that address itself (a wide
// CIDR or an allow-all does not), then applies each of the server's
// sandboxes' allowOut/denyOut/internet rules by source address. Packets
// between two ports of the bridge only reach iptables with
// net.bridge.bridge-nf-call-iptables on, so New refuses to run without
// it. Template builds run on a bridge of their own (Config.BuildBridge)
// whose packets go through the same two chains: no host, no link-local,
// no sandbox, no other build. Rules only ever refuse or return, never
// accept, so the engine's own isolation between networks still applies
// after them.
// A third chain, in the nat table and jumped to from PREROUTING, sends
// what a sandbox with domains in allowOut would otherwise have refused or
// unchecked to the egress server (internal/egress) it runs on the
// bridge's host address: its DNS queries, and its TCP connections to
// denied addresses; the input chain lets those redirected packets in.
// From a sandbox with header rules or an egress proxy it sends all TCP
// (but to the host and link-local addresses, which stay refused), and
// its DNS when a rule names a host: the gateway then enforces that
// sandbox's allowOut and denyOut for TCP, and the forward chain for the
// rest.
// Every rule has a comment starting "warren:<bridge>:", so
// `iptables-save | grep warren:` lists them; Uninstall removes them.
//
// It shells out to iptables-restore (each write is one atomic commit,
// which inserts a new sandbox's rules rather than rewriting the chains:
// see ruleset) and iptables. It does not create the network or learn addresses: the
// runtime does, and the lifecycle manager tells it.
package firewall

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/egress"
	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/tlsca"
)

// Config configures a Firewall.
type Config struct {
	// Bridge is the host interface of the sandbox network, e.g. "warren0".
	// Required.
	Bridge string
	// BuildBridge is the host interface of the network template builds
	// run on (see runtime/docker's EnsureBuildNetwork). Packets from it
	// get the host and link-local refusals sandboxes get, and do not
	// reach another build. Default "": builds are not covered.
	BuildBridge string
	// Instance names this server among those sharing the bridge (serve's
	// --instance); each has its own chains. Default
	// sandbox.DefaultInstance, as the runtime's.
	Instance string
	// DNSUpstream lists the resolvers the egress server forwards sandboxes'
	// queries to, as host:port. Default: those of /etc/resolv.conf.
	DNSUpstream []string
	// Logger receives debug logs. Default: discard.
	Logger *slog.Logger
	// Authority, RootCAs and Expander are the egress gateway's, for the
	// sandboxes with header rules (see egress.Config).
	Authority *tlsca.Authority
	RootCAs   *x509.CertPool
	Expander  egress.Expander
	// PublicProxiesOnly refuses egress proxies at private or loopback
	// addresses (egress.Config.PublicProxiesOnly); Apply refuses such an
	// IP literal at once.
	PublicProxiesOnly bool
}

// Firewall is sandbox.Firewall on iptables. It is safe for concurrent use.
type Firewall struct {
	c      chains
	log    *slog.Logger
	v4     family
	v6     *family // nil when ip6tables is not installed
	egress *egress.Server
	// publicProxies refuses egress proxies at private addresses.
	publicProxies bool

	mu    sync.Mutex // guards the fields below and serialises every change to the kernel
	rules map[string]sandbox.Egress
	// restores counts the writes to the kernel, for tests.
	restores int
	// kernel is what our chains hold, by family, as last written (a
	// family is missing when unknown): a write changes only what differs
	// from it, and nothing when nothing does (the IPv6 chains never change
	// with the rules, and a pooled container's may not when it is
	// claimed). install rewrites everything.
	kernel map[string]ruleset
	ports  egress.Ports // zero until the egress server listens

	byIP atomic.Pointer[map[netip.Addr]egress.Sandbox] // sandboxes by address, for the egress server

	qmu     sync.Mutex // guards pending; never held across a write
	pending []*change  // Apply and Remove calls waiting for the next write (see commit)
}

var _ sandbox.Firewall = (*Firewall)(nil)

// family is the iptables commands of one address family.
type family struct {
	name            string // "iptables" or "ip6tables", for messages
	iptables        string // path
	iptablesRestore string // path
}

// New finds iptables and checks that it can be used; it changes nothing.
// Call Restore (or Sync) to install the rules.
func New(ctx context.Context, cfg Config) (*Firewall, error) {
	if err := validateBridge(cfg.Bridge); err != nil {
		return nil, err
	}
	if cfg.BuildBridge != "" {
		if err := validateBridge(cfg.BuildBridge); err != nil {
			return nil, err
		}
		if cfg.BuildBridge == cfg.Bridge {
			return nil, fmt.Errorf("firewall: template builds need a bridge of their own, not the sandboxes' %s", cfg.Bridge)
		}
	}
	if cfg.Instance == "" {
		cfg.Instance = sandbox.DefaultInstance
	}
	v4, err := usableIPv4(ctx)
	if err != nil {
		return nil, err
	}
	if err := bridgeFiltered(bridgeNFPath); err != nil {
		return nil, err
	}
	f := &Firewall{c: chainsFor(cfg.Bridge, cfg.BuildBridge, cfg.Instance), log: logkey.For(cfg.Logger, "firewall"), publicProxies: cfg.PublicProxiesOnly, v4: v4, rules: map[string]sandbox.Egress{}}
	f.reindex()
	f.egress, err = egress.New(egress.Config{
		Policy: f.policy, Upstream: cfg.DNSUpstream, Logger: cfg.Logger,
		Authority: cfg.Authority, RootCAs: cfg.RootCAs, Expander: cfg.Expander, PublicProxiesOnly: cfg.PublicProxiesOnly,
	})
	if err != nil {
		return nil, err
	}
	if v6, err := findFamily("ip6tables"); err == nil {
		if _, err := v6.run(ctx, "-S", "INPUT"); err == nil {
			f.v6 = &v6
		} else {
			f.log.Warn("ip6tables does not work; IPv6 rules not installed (sandboxes have no IPv6 anyway)", "err", err)
		}
	}
	return f, nil
}

// Check reports whether iptables is installed and usable here, as New
// needs; it changes nothing. Its error says what to do.
func Check(ctx context.Context) error {
	if _, err := usableIPv4(ctx); err != nil {
		return err
	}
	return bridgeFiltered(bridgeNFPath)
}

// bridgeNFPath is the sysctl that makes packets one bridge port sends to
// another go through iptables (the br_netfilter module).
const bridgeNFPath = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// bridgeFiltered checks that iptables sees the packets a bridge forwards
// between its ports, which is how sandboxes on one bridge talk: without
// it the forward chain never sees them and sandboxes reach each other
// whatever the rules say. The engine turns it on when it creates a bridge
// network with IP forwarding on; Warren does not change it, it refuses to
// run without it.
func bridgeFiltered(path string) error {
	b, err := os.ReadFile(path)
	if err == nil && strings.TrimSpace(string(b)) == "1" {
		return nil
	}
	why := "is not 1"
	if err != nil {
		why = "is missing (the br_netfilter module is not loaded)"
	}
	return fmt.Errorf("firewall: %s %s, so iptables does not see traffic between sandboxes on the bridge and cannot keep them apart: run `modprobe br_netfilter && sysctl -w net.bridge.bridge-nf-call-iptables=1` (the engine does so when it runs with iptables and IP forwarding)", path, why)
}

// usableIPv4 finds iptables and lists a chain with it, which needs root.
func usableIPv4(ctx context.Context) (family, error) {
	v4, err := findFamily("iptables")
	if err != nil {
		return family{}, fmt.Errorf("firewall: %w: install it (Debian/Ubuntu: apt-get install iptables), or run without a firewall, which leaves sandboxes able to reach the host and each other", err)
	}
	if _, err := v4.run(ctx, "-S", "INPUT"); err != nil {
		return family{}, fmt.Errorf("firewall: iptables does not work here (it needs root, or CAP_NET_ADMIN): %w", err)
	}
	return v4, nil
}

func findFamily(name string) (family, error) {
	ipt, err := exec.LookPath(name)
	if err != nil {
		return family{}, fmt.Errorf("%s not found", name)
	}
	restore, err := exec.LookPath(name + "-restore")
	if err != nil {
		return family{}, fmt.Errorf("%s-restore not found", name)
	}
	return family{name: name, iptables: ipt, iptablesRestore: restore}, nil
}

// Apply installs or replaces one sandbox's egress rules.
func (f *Firewall) Apply(ctx context.Context, sandboxID string, e sandbox.Egress) error {
	ip := e.IP
	if !ip.Is4() {
		return fmt.Errorf("firewall: sandbox %s has no IPv4 address on %s (got %q)", sandboxID, f.c.bridge, ip)
	}
	if err := e.Network.ValidateEgress(); err != nil {
		return err
	}
	if px := e.Network.EgressProxy; px != nil && f.publicProxies && !egress.PublicProxy(px.Address) {
		return sandbox.Errorf(sandbox.KindInvalid, "network.egressProxy.address '%s' is a private, loopback or link-local address, which this server does not take proxies at (warren serve --egress-proxy-private=false)", px.Address)
	}
	if err := f.commit(ctx, &change{id: sandboxID, egress: e}); err != nil {
		return err
	}
	f.log.Debug("egress rules applied", logkey.Sandbox, sandboxID, "ip", ip)
	return nil
}

// Remove deletes one sandbox's rules.
func (f *Firewall) Remove(ctx context.Context, sandboxID string) error {
	if err := f.commit(ctx, &change{id: sandboxID, remove: true}); err != nil {
		return err
	}
	f.log.Debug("egress rules removed", logkey.Sandbox, sandboxID)
	return nil
}

// A change is one sandbox's rules set (Apply) or deleted (Remove), waiting
// for the write to the kernel that carries it.
type change struct {
	id     string
	egress sandbox.Egress
	remove bool
	done   chan error // buffered: the outcome, sent once

	prev    sandbox.Egress // what the rules were before it, for undo
	hadPrev bool
	// evicted holds the rules of other sandboxes at the address an Apply
	// gives to its own, for undo.
	evicted map[string]sandbox.Egress
}

// commit queues c and returns once a write to the kernel carried it.
// Every write rewrites the chains whole, so changes that queue while one
// is written go together in the next (a group commit): a burst of N
// creates costs a few iptables-restore runs instead of N in a row, each
// waiting for the one before.
func (f *Firewall) commit(ctx context.Context, c *change) error {
	c.done = make(chan error, 1)
	f.qmu.Lock()
	f.pending = append(f.pending, c)
	f.qmu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case err := <-c.done: // the writer before carried it
		return err
	default:
	}
	f.qmu.Lock()
	batch := f.pending
	f.pending = nil
	f.qmu.Unlock()
	// The write is short and shared: one caller giving up must not fail
	// the others' changes.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := f.writeBatch(wctx, batch)
	if err != nil && len(batch) > 1 {
		// One change may be what the kernel refuses: write each alone, so
		// that only it fails.
		for _, b := range batch {
			b.done <- f.writeBatch(wctx, []*change{b})
		}
	} else {
		for _, b := range batch {
			b.done <- err
		}
	}
	return <-c.done
}

// writeBatch applies changes to f.rules and writes the chains; if the
// write fails, f.rules is as it was. The caller holds f.mu.
func (f *Firewall) writeBatch(ctx context.Context, batch []*change) error {
	var gone []netip.Addr // addresses whose rules are no longer theirs
	dirty := false
	for _, c := range batch {
		c.prev, c.hadPrev = f.rules[c.id]
		switch {
		case c.remove && !c.hadPrev:
			continue
		case c.remove:
			delete(f.rules, c.id)
			gone = append(gone, c.prev.IP)
		default:
			f.evict(c)
			f.rules[c.id] = c.egress
			if c.hadPrev && c.prev.IP != c.egress.IP {
				gone = append(gone, c.prev.IP)
			}
		}
		dirty = true
	}
	if !dirty {
		return nil
	}
	if err := f.writeChains(ctx, false); err != nil {
		for _, c := range slices.Backward(batch) {
			if c.hadPrev {
				f.rules[c.id] = c.prev
			} else {
				delete(f.rules, c.id)
			}
			maps.Copy(f.rules, c.evicted)
		}
		return err
	}
	f.reindex()
	for _, ip := range gone {
		if _, ok := (*f.byIP.Load())[ip]; !ok {
			f.egress.Forget(ip)
		}
	}
	return nil
}

// evict drops the rules of every other sandbox at the address c applies
// rules for. An address has one owner, the latest: the engine hands a
// released address to the next container, and rules left for its last
// holder (a container that died before its rules were removed) would
// otherwise judge the new one's packets first. The caller holds f.mu.
func (f *Firewall) evict(c *change) {
	c.evicted = nil
	for id, e := range f.rules {
		if id != c.id && e.IP == c.egress.IP {
			if c.evicted == nil {
				c.evicted = map[string]sandbox.Egress{}
			}
			c.evicted[id] = e
			delete(f.rules, id)
			f.log.Debug("egress rules of an address's last holder dropped", logkey.Sandbox, id, "ip", e.IP, "holder", c.id)
		}
	}
}

// RefuseToBuilds sets the networks, beyond the host and the sandboxes,
// that template builds may not reach: on the Kubernetes engine, whose
// sandboxes are pods elsewhere, the cluster's pod networks. It rewrites
// the chains when they change. Without a build bridge it does nothing.
func (f *Firewall) RefuseToBuilds(ctx context.Context, nets []netip.Prefix) error {
	nets = slices.Clone(nets)
	slices.SortFunc(nets, func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
	nets = slices.Compact(nets)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.c.build == "" || slices.Equal(nets, f.c.buildRefused) {
		return nil
	}
	prev := f.c.buildRefused
	f.c.buildRefused = nets
	if err := f.writeChains(ctx, false); err != nil {
		f.c.buildRefused = prev
		return err
	}
	f.log.Info("template builds refused networks", "networks", fmt.Sprint(nets))
	return nil
}

// Sync replaces every sandbox's rules and reinstalls the host-wide ones.
func (f *Firewall) Sync(ctx context.Context, rules map[string]sandbox.Egress) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = make(map[string]sandbox.Egress, len(rules))
	for id, e := range rules {
		f.rules[id] = e
	}
	f.reindex()
	return f.install(ctx)
}

// reindex republishes the rules by address for the egress server. The
// caller holds f.mu (or has not shared f yet).
func (f *Firewall) reindex() {
	m := make(map[netip.Addr]egress.Sandbox, len(f.rules))
	for id, e := range f.rules {
		m[e.IP] = egress.Sandbox{ID: id, TeamID: e.TeamID, Network: e.Network}
	}
	f.byIP.Store(&m)
}

// policy tells the egress server the sandbox at src.
func (f *Firewall) policy(src netip.Addr) (egress.Sandbox, bool) {
	n, ok := (*f.byIP.Load())[src]
	return n, ok
}

// SetExpander gives the egress gateway what resolves the placeholders of
// header rules (see egress.Server.SetExpander).
func (f *Firewall) SetExpander(e egress.Expander) { f.egress.SetExpander(e) }

// Close stops the egress server. The rules stay: sandboxes keep their
// isolation while the server is down, and domain rules fail closed.
func (f *Firewall) Close() error {
	return f.egress.Close()
}

// Restore reinstalls the chains, with every known sandbox's rules, and
// the jumps to them. It is idempotent; the manager calls it on every
// reconcile so that rules lost to an engine restart come back.
func (f *Firewall) Restore(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.install(ctx)
}

// install writes the chains, then makes sure the built-in chains jump to
// them. The caller holds f.mu.
func (f *Firewall) install(ctx context.Context) error {
	if err := bridgeFiltered(bridgeNFPath); err != nil {
		return err
	}
	f.listenEgress()
	if err := f.writeChains(ctx, true); err != nil {
		return err
	}
	for _, fam := range f.families() {
		hook := "FORWARD"
		if _, err := fam.run(ctx, "-S", "DOCKER-USER"); err == nil {
			hook = "DOCKER-USER"
		}
		for _, j := range f.filterJumps() {
			from := j.from
			if from == "FORWARD" {
				from = hook
			}
			if err := f.ensureJump(ctx, fam, "filter", from, j.rule); err != nil {
				return err
			}
		}
	}
	return f.ensureJump(ctx, f.v4, "nat", "PREROUTING", f.c.jump(f.c.bridge, f.c.redirect, "domain rules of sandboxes"))
}

// filterJump is a jump from a built-in chain of the filter table (FORWARD
// standing for DOCKER-USER where the engine has it) to one of ours.
type filterJump struct {
	from string
	rule []string
}

// filterJumps are the filter table's jumps to our chains: the sandbox
// bridge's, and the build bridge's into the same chains, whose rules hold
// for builds too (they only match sandboxes by address).
func (f *Firewall) filterJumps() []filterJump {
	js := []filterJump{
		{"INPUT", f.c.jump(f.c.bridge, f.c.input, "isolate sandboxes from the host")},
		{"FORWARD", f.c.jump(f.c.bridge, f.c.forward, "egress rules of sandboxes")},
	}
	if f.c.build != "" {
		js = append(js,
			filterJump{"INPUT", f.c.jump(f.c.build, f.c.input, "isolate template builds from the host")},
			filterJump{"FORWARD", f.c.jump(f.c.build, f.c.forward, "egress rules of template builds")})
	}
	return js
}

// listenEgress starts the egress server on the bridge's IPv4 address, once.
// Without it domain rules fail closed: nothing is redirected, so what the
// rules deny stays denied. The caller holds f.mu.
func (f *Firewall) listenEgress() {
	if f.ports != (egress.Ports{}) {
		return
	}
	bridge, err := bridgeAddr(f.c.bridge)
	addr := bridge.Addr()
	if err == nil {
		shut := []netip.Prefix{bridge}
		if f.c.build != "" {
			if b, err := bridgeAddr(f.c.build); err == nil {
				shut = append(shut, b)
			}
		}
		f.ports, err = f.egress.Listen(addr, shut...)
	}
	if err != nil {
		f.log.Warn("egress server not started: domains in allowOut open nothing", "bridge", f.c.bridge, "err", err)
		return
	}
	f.log.Info("egress server listening", "addr", addr, "dns", f.ports.DNS, "gateway", f.ports.Gateway)
}

// bridgeAddr is the first IPv4 address of the bridge interface, with the
// length of its network's prefix.
func bridgeAddr(bridge string) (netip.Prefix, error) {
	ifc, err := net.InterfaceByName(bridge)
	if err != nil {
		return netip.Prefix{}, err
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return netip.Prefix{}, err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ip, ok := netip.AddrFromSlice(n.IP)
			ones, bits := n.Mask.Size()
			if ok && ip.Unmap().Is4() && bits == 32 {
				return netip.PrefixFrom(ip.Unmap(), ones), nil
			}
		}
	}
	return netip.Prefix{}, fmt.Errorf("bridge %s has no IPv4 address", bridge)
}

// writeChains brings our chains to f.rules, one atomic commit per
// family, from what they held as last written; when all is true it
// rewrites them whole (they may have been lost: an engine restart, an
// operator's flush). The caller holds f.mu.
func (f *Firewall) writeChains(ctx context.Context, all bool) error {
	f.restores++
	if f.kernel == nil || all {
		f.kernel = map[string]ruleset{}
	}
	for _, fam := range f.families() {
		want := f.c.ruleset(fam.name == "ip6tables", f.rules, f.ports)
		was, known := f.kernel[fam.name]
		in, now := want.restore(was)
		if in == "" {
			continue
		}
		delete(f.kernel, fam.name) // unknown until the write succeeds
		err := fam.restore(ctx, in)
		if err != nil && known {
			// The chains may no longer hold what was written (an
			// operator's flush), where the additions were to go.
			in, now = want.restore(nil)
			err = fam.restore(ctx, in)
		}
		if err != nil {
			return err
		}
		f.kernel[fam.name] = now
	}
	return nil
}

// restore runs the family's iptables-restore on in, without flushing the
// tables, waiting for the xtables lock.
func (fam family) restore(ctx context.Context, in string) error {
	cmd := exec.CommandContext(ctx, fam.iptablesRestore, "-w", "--noflush")
	cmd.Stdin = strings.NewReader(in)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("firewall: %s-restore: %w: %s", fam.name, err, bytes.TrimSpace(out))
	}
	return nil
}

// ensureJump inserts a jump rule (see chains.jump) into a built-in chain
// of table at its top, unless it is already there.
func (f *Firewall) ensureJump(ctx context.Context, fam family, table, from string, rule []string) error {
	if _, err := fam.run(ctx, append([]string{"-t", table, "-C", from}, rule...)...); err == nil {
		return nil
	}
	if _, err := fam.run(ctx, append([]string{"-t", table, "-I", from, "1"}, rule...)...); err != nil {
		return fmt.Errorf("firewall: cannot hook %s into %s: %w", rule[len(rule)-1], from, err)
	}
	f.log.Info("firewall chain hooked", "family", fam.name, "chain", from, "rule", strings.Join(rule, " "))
	return nil
}

// Chains returns the names of the input and forward chains for IPv4.
func (f *Firewall) Chains() (input, forward string) { return f.c.input, f.c.forward }

// Uninstall removes this server's rules and chains on the bridge; for
// tests and for operators retiring a server.
func (f *Firewall) Uninstall(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kernel = nil
	var errs []error
	rule := f.c.jump(f.c.bridge, f.c.redirect, "domain rules of sandboxes")
	for {
		if _, err := f.v4.run(ctx, append([]string{"-t", "nat", "-D", "PREROUTING"}, rule...)...); err != nil {
			break
		}
	}
	if _, err := f.v4.run(ctx, "-t", "nat", "-S", f.c.redirect); err == nil {
		for _, op := range []string{"-F", "-X"} {
			if _, err := f.v4.run(ctx, "-t", "nat", op, f.c.redirect); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, fam := range f.families() {
		for _, j := range f.filterJumps() {
			from := []string{j.from}
			if j.from == "FORWARD" {
				from = append(from, "DOCKER-USER")
			}
			for _, chain := range from {
				for {
					if _, err := fam.run(ctx, append([]string{"-D", chain}, j.rule...)...); err != nil {
						break
					}
				}
			}
		}
		for _, chain := range []string{f.c.input, f.c.forward} {
			if _, err := fam.run(ctx, "-S", chain); err != nil {
				continue // not there
			}
			if _, err := fam.run(ctx, "-F", chain); err != nil {
				errs = append(errs, err)
			}
			if _, err := fam.run(ctx, "-X", chain); err != nil {
				errs = append(errs, err)
			}
		}
	}
	f.rules = map[string]sandbox.Egress{}
	f.reindex()
	return errors.Join(errs...)
}

func (f *Firewall) families() []family {
	if f.v6 == nil {
		return []family{f.v4}
	}
	return []family{f.v4, *f.v6}
}

// run runs the family's iptables with args, waiting for the xtables lock.
func (fam family) run(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, fam.iptables, append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", fam.name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}
