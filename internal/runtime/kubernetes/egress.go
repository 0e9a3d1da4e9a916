package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/egress"
	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/nodeagent"
	"github.com/warrenhq/warren/internal/podnet"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/tlsca"
)

// EgressAgents sends a node's agent the egress rules of that node's
// sandbox pods (NodeAgentPods does, over its TLS).
type EgressAgents interface {
	Nodes(ctx context.Context) ([]string, error)
	SetEgress(ctx context.Context, node string, r nodeagent.EgressRules) error
}

// SetEgress sends node's agent its sandboxes' egress rules.
func (n *NodeAgentPods) SetEgress(ctx context.Context, node string, r nodeagent.EgressRules) error {
	return n.call(ctx, node, func(a string) error { return n.client.SetEgress(ctx, a, r) })
}

// Firewall is sandbox.Firewall on the Kubernetes engine: every sandbox
// pod's default isolation is its own namespace's (podnet, installed by its
// init container), and the egress settings that restrict more, header
// rules and egress proxies are enforced by the node agent of the pod's
// node (nodeagent.Egress), to which the Firewall sends them, and only to
// it. A sandbox whose settings restrict nothing costs no call. It keeps
// every sandbox's rules in memory and sends each node its whole set on
// every change, so a node agent that restarted (and knows nothing) has
// them all again at the next change or Restore, which the manager calls
// on every reconcile.
//
// Header rules' placeholders are resolved here, with the Expander the
// server sets, when a node's set is sent: the node gets the values of its
// own sandboxes' placeholders and no other, and Warren's egress CA only
// while one of them has header rules. A node's set is sent again when a
// secret of a team with sandboxes there changes (SecretsChanged), and
// every tokenRefresh while one of them has workload-identity tokens, so
// that the tokens the gateway sends are never older than that.
//
// It also opens named neighbours (neighbours.go): whenever the pairs of
// same-team sandboxes whose allowOut names each other's address change,
// the pods on both ends have their own rules replaced, and Apply returns
// once they are; a pod whose change failed, or that was frozen, is tried
// again at every Restore.
type Firewall struct {
	rt       *Runtime
	agents   EgressAgents
	cfg      FirewallConfig
	tls      *nodeagent.EgressTLS // LoadCA's; nil: TLS to hosts with rules refused. Guarded by mu
	log      *slog.Logger
	expander atomic.Pointer[egress.Expander]
	stop     context.CancelFunc
	done     chan struct{}

	mu    sync.Mutex            // guards rules, all, opened and planned; serialises the sends
	rules map[string]nodeEgress // by sandbox ID: the enforced ones
	// all is every sandbox's settings, restricted or not, by ID: the
	// neighbour pairs are read from them.
	all map[string]sandbox.Egress
	// opened is what each sandbox pod's own rules open for neighbours, as
	// last applied; a pod missing is not known (never applied since
	// Sync, or its last change failed), and its rules are set again.
	opened map[netip.Addr]podPeers
	// planned is the pairs as last worked out: a change of them is what
	// Apply and Remove act on (and wait for), the rest is Restore's.
	planned map[netip.Addr]podPeers

	// peers changes a pod's own rules (the Runtime; tests replace it).
	peers interface {
		setPeers(ctx context.Context, ip netip.Addr, p podPeers) error
	}
	podLocks sync.Map // netip.Addr → *sync.Mutex: one change at a time per pod
}

// FirewallConfig configures a Firewall.
type FirewallConfig struct {
	// DNS are the resolvers (host:port) the nodes' gateways forward to;
	// nil: each node's.
	DNS []string
	// Roots are PEM certificates the gateways trust beside the system's
	// (--egress-trust-ca).
	Roots string
	// PublicProxiesOnly refuses egress proxies at private, loopback and
	// link-local addresses.
	PublicProxiesOnly bool
	Logger            *slog.Logger
}

// tokenRefresh is how often the nodes holding sandboxes with workload
// tokens get freshly minted ones: well within a token's life.
const tokenRefresh = 5 * time.Minute

// nodeEgress is a sandbox's rules and the node of its pod.
type nodeEgress struct {
	node   string
	egress sandbox.Egress
}

var _ sandbox.Firewall = (*Firewall)(nil)

// NewFirewall enforces egress settings through agents. Close stops its
// token refresh.
func NewFirewall(rt *Runtime, agents EgressAgents, cfg FirewallConfig) *Firewall {
	f := &Firewall{rt: rt, agents: agents, cfg: cfg, log: logkey.For(cfg.Logger, "kubefirewall"), rules: map[string]nodeEgress{},
		all: map[string]sandbox.Egress{}, opened: map[netip.Addr]podPeers{}, planned: map[netip.Addr]podPeers{}, peers: rt, done: make(chan struct{})}
	thawed := func(ctx context.Context) {
		if err := f.openPeers(ctx, netip.Addr{}, true); err != nil {
			f.log.ErrorContext(ctx, "cannot set the neighbours of a thawed sandbox's pod: tried again at the next reconcile", "err", err)
		}
	}
	rt.afterThaw.Store(&thawed)
	deleting := f.closeTo
	rt.beforeDelete.Store(&deleting)
	var ctx context.Context
	ctx, f.stop = context.WithCancel(context.Background())
	go f.refreshTokens(ctx)
	return f
}

// LoadCA loads the CA that the nodes' gateways intercept TLS with from
// dir, making one there if it holds none, and returns its certificate
// (PEM), which sandboxes trust; until then TLS to a host with header
// rules is refused. The CA is one of its own, not the server's, since its
// key goes to the nodes. The server loads it once the state dir holds the
// files the control plane's replicas share (<state-dir>/egress-ca is one),
// so that a sandbox made under one leader trusts the gateways of the next.
func (f *Firewall) LoadCA(dir string) (string, error) {
	ca, err := tlsca.LoadAuthority(dir, nil)
	if err != nil {
		return "", fmt.Errorf("egress gateway CA: %w", err)
	}
	key, err := ca.KeyPEM()
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tls = &nodeagent.EgressTLS{CACert: string(ca.CertPEM()), CAKey: string(key), Roots: f.cfg.Roots}
	return string(ca.CertPEM()), nil
}

// Close stops the token refresh.
func (f *Firewall) Close() error {
	f.stop()
	<-f.done
	return nil
}

// SetExpander gives the Firewall what resolves header rules'
// placeholders (the secrets service); without one none resolves.
func (f *Firewall) SetExpander(e egress.Expander) { f.expander.Store(&e) }

// SecretsChanged sends again the sets of the nodes holding sandboxes of
// team whose header rules name a secret, before it returns: the request
// a sandbox sends after a secret changed carries its new value, and none
// carries a deleted one.
func (f *Firewall) SecretsChanged(ctx context.Context, team string) error {
	return f.resend(ctx, func(e sandbox.Egress) bool {
		return e.TeamID == team && slices.ContainsFunc(sandbox.RulePlaceholders(e.Network.Rules), func(p sandbox.Placeholder) bool {
			return p.Kind == sandbox.PlaceholderSecret
		})
	})
}

// refreshTokens sends, every tokenRefresh, the nodes holding sandboxes
// with workload tokens their sets again, with tokens minted anew.
func (f *Firewall) refreshTokens(ctx context.Context) {
	defer close(f.done)
	t := time.NewTicker(tokenRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := f.resend(ctx, func(e sandbox.Egress) bool {
			return slices.ContainsFunc(sandbox.RulePlaceholders(e.Network.Rules), func(p sandbox.Placeholder) bool {
				return p.Kind == sandbox.PlaceholderToken
			})
		})
		if err != nil && ctx.Err() == nil {
			f.log.ErrorContext(ctx, "cannot send the nodes their sandboxes' workload tokens anew", "err", err)
		}
	}
}

// resend sends again the sets of the nodes holding a sandbox that which
// picks.
func (f *Firewall) resend(ctx context.Context, which func(sandbox.Egress) bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	nodes := map[string]bool{}
	for _, r := range f.rules {
		if which(r.egress) {
			nodes[r.node] = true
		}
	}
	var errs []error
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		errs = append(errs, f.send(ctx, n))
	}
	return errors.Join(errs...)
}

// Apply sends the sandbox's rules to its pod's node, or takes them away
// from it when they restrict nothing, then opens the neighbours its
// allowOut names, and opens it to those whose allowOut names it. A
// failure to change its own pod's rules fails it; another pod's is tried
// again at Restore (its pair stays refused meanwhile).
func (f *Firewall) Apply(ctx context.Context, id string, e sandbox.Egress) error {
	if err := e.Network.ValidateEgress(); err != nil {
		return err
	}
	if px := e.Network.EgressProxy; px != nil && f.cfg.PublicProxiesOnly && !egress.PublicProxy(px.Address) {
		return sandbox.Errorf(sandbox.KindInvalid, "network.egressProxy.address '%s' is a private, loopback or link-local address, which this server does not take proxies at (warren serve --egress-proxy-private=false)", px.Address)
	}
	if err := f.applyNode(ctx, id, e); err != nil {
		return err
	}
	f.mu.Lock()
	fresh := true
	for other, o := range f.all {
		if o.IP == e.IP {
			fresh = false
			if other != id {
				delete(f.all, other) // a pool pod's, now the claim's
			}
		} else if other == id {
			delete(f.opened, o.IP) // the sandbox has a new pod
		}
	}
	if _, known := f.opened[e.IP]; fresh && !known {
		f.opened[e.IP] = podPeers{} // a new pod: its init container opened none
	}
	f.all[id] = e
	f.mu.Unlock()
	return f.openPeers(ctx, e.IP, false)
}

// applyNode sends the sandbox's rules to its pod's node, or takes them
// away from it when they restrict nothing.
func (f *Firewall) applyNode(ctx context.Context, id string, e sandbox.Egress) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev, had := f.rules[id]
	if !nodeagent.NodeEnforced(e.Network) {
		if !had {
			return nil
		}
		delete(f.rules, id)
		if err := f.send(ctx, prev.node); err != nil {
			f.rules[id] = prev
			return err
		}
		return nil
	}
	if !e.IP.Is4() {
		return sandbox.Errorf(sandbox.KindInternal, "the sandbox's pod has no IPv4 address (%q)", e.IP)
	}
	node, err := f.rt.nodeOfIP(ctx, e.IP)
	if err != nil {
		return err
	}
	evicted := map[string]nodeEgress{}
	for other, r := range f.rules {
		if other != id && r.egress.IP == e.IP {
			evicted[other] = r
			delete(f.rules, other)
		}
	}
	f.rules[id] = nodeEgress{node: node, egress: e}
	nodes := []string{node}
	if had && prev.node != node {
		nodes = append(nodes, prev.node)
	}
	for _, n := range nodes {
		if err := f.send(ctx, n); err != nil {
			delete(f.rules, id)
			if had {
				f.rules[id] = prev
			}
			maps.Copy(f.rules, evicted)
			return err
		}
	}
	return nil
}

// Remove takes a sandbox's rules from its node, and closes its
// neighbours' pods to its address, which its pod is giving up.
func (f *Firewall) Remove(ctx context.Context, id string) error {
	f.mu.Lock()
	if e, ok := f.all[id]; ok {
		delete(f.all, id)
		delete(f.opened, e.IP)
	}
	var err error
	if prev, had := f.rules[id]; had {
		delete(f.rules, id)
		err = f.send(ctx, prev.node)
	}
	f.mu.Unlock()
	if perr := f.openPeers(ctx, netip.Addr{}, false); perr != nil {
		f.log.ErrorContext(ctx, "cannot close the neighbours of a sandbox that went", logkey.Sandbox, id, "err", perr)
	}
	return err
}

// Sync replaces every sandbox's rules and sends every node its set.
func (f *Firewall) Sync(ctx context.Context, rules map[string]sandbox.Egress) error {
	f.syncNodes(ctx, rules)
	if err := f.openPeers(ctx, netip.Addr{}, true); err != nil {
		f.log.ErrorContext(ctx, "cannot set every sandbox pod's neighbours", "err", err)
	}
	return nil
}

// syncNodes replaces every sandbox's rules and sends every node its set;
// every pod's neighbours are unknown until openPeers sets them.
func (f *Firewall) syncNodes(ctx context.Context, rules map[string]sandbox.Egress) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.all, f.opened = maps.Clone(rules), map[netip.Addr]podPeers{}
	f.rules = map[string]nodeEgress{}
	for id, e := range rules {
		if !nodeagent.NodeEnforced(e.Network) {
			continue
		}
		node, err := f.rt.nodeOfIP(ctx, e.IP)
		if err != nil {
			f.log.WarnContext(ctx, "no pod for a sandbox's egress rules", logkey.Sandbox, id, "err", err)
			continue
		}
		f.rules[id] = nodeEgress{node: node, egress: e}
	}
	// A node that does not take its set now keeps refusing its sandboxes
	// with settings (the table its agent left sends them to a gateway
	// that knows none of them): Restore tries again at every reconcile,
	// and the server starts meanwhile.
	if err := f.sendAll(ctx); err != nil {
		f.log.ErrorContext(ctx, "cannot send every node its egress rules", "err", err)
	}
}

// Restore sends every node its set again: a node agent that restarted
// knows nothing until then (and refuses the sandboxes its last table
// names meanwhile).
func (f *Firewall) Restore(ctx context.Context) error {
	f.mu.Lock()
	err := f.sendAll(ctx)
	f.mu.Unlock()
	return errors.Join(err, f.openPeers(ctx, netip.Addr{}, true))
}

// Uninstall takes every sandbox's rules from every node.
func (f *Firewall) Uninstall(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules, f.all, f.opened, f.planned = map[string]nodeEgress{}, map[string]sandbox.Egress{}, map[netip.Addr]podPeers{}, map[netip.Addr]podPeers{}
	return f.sendAll(ctx)
}

// sendAll sends every node with an agent its set, and every node named by
// a rule. Only the failures of nodes with rules are errors: one whose
// agent is away holds no sandbox with settings (its table, if any, is
// emptied when it is back). The caller holds f.mu.
func (f *Firewall) sendAll(ctx context.Context) error {
	nodes, err := f.agents.Nodes(ctx)
	if err != nil {
		f.log.WarnContext(ctx, "cannot list the node agents", "err", err)
	}
	held := map[string]bool{}
	for _, r := range f.rules {
		nodes = append(nodes, r.node)
		held[r.node] = true
	}
	slices.Sort(nodes)
	var errs []error
	for _, n := range slices.Compact(nodes) {
		if err := f.send(ctx, n); err != nil && held[n] {
			errs = append(errs, err)
		} else if err != nil {
			f.log.WarnContext(ctx, "cannot empty a node's egress rules", "node", n, "err", err)
		}
	}
	return errors.Join(errs...)
}

// send sends node its sandboxes' rules. The caller holds f.mu.
func (f *Firewall) send(ctx context.Context, node string) error {
	refuse, err := f.rt.refused(ctx)
	if err != nil {
		return err
	}
	r := nodeagent.EgressRules{Instance: f.rt.cfg.Instance, DNS: f.cfg.DNS, Refuse: append(podnet.DefaultRefused(), refuse...)}
	for _, id := range slices.Sorted(maps.Keys(f.rules)) {
		if ne := f.rules[id]; ne.node == node {
			e := ne.egress
			r.Sandboxes = append(r.Sandboxes, nodeagent.EgressSandbox{ID: id, IP: e.IP, TeamID: e.TeamID, Network: e.Network,
				Resolved: f.resolve(ctx, id, e)})
			if len(e.Network.Rules) > 0 {
				r.TLS = f.tls
			}
		}
	}
	if err := f.agents.SetEgress(ctx, node, r); err != nil {
		return sandbox.Wrap(sandbox.KindOf(err), err, "cannot enforce the sandbox's network settings on its node: "+err.Error())
	}
	f.log.DebugContext(ctx, "egress rules sent", "node", node, "sandboxes", len(r.Sandboxes))
	return nil
}

// resolve resolves the placeholders of a sandbox's header rules; nil
// without any. What does not resolve goes as its refusal: the node's
// gateway fails the requests that need it, as the Docker engine's does.
func (f *Firewall) resolve(ctx context.Context, id string, e sandbox.Egress) map[string]nodeagent.Resolution {
	ps := sandbox.RulePlaceholders(e.Network.Rules)
	if len(ps) == 0 {
		return nil
	}
	out := make(map[string]nodeagent.Resolution, len(ps))
	ex := f.expander.Load()
	for _, p := range ps {
		if _, done := out[p.Text]; done {
			continue
		}
		if ex == nil {
			out[p.Text] = nodeagent.Resolution{Refusal: "placeholders cannot be resolved on this server (no secrets store)"}
			continue
		}
		v, err := (*ex).Expand(ctx, id, e.TeamID, p.Text)
		if err != nil {
			out[p.Text] = nodeagent.Resolution{Refusal: err.Error()}
			continue
		}
		out[p.Text] = nodeagent.Resolution{Value: v}
	}
	return out
}

// nodeOfIP returns the node of this server's live sandbox pod at ip.
func (r *Runtime) nodeOfIP(ctx context.Context, ip netip.Addr) (string, error) {
	p, err := r.podAt(ctx, ip)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return "", sandbox.Wrap(sandbox.KindInternal, err, err.Error())
	}
	if err != nil {
		return "", err
	}
	return p.Spec.NodeName, nil
}
