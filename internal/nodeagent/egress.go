package nodeagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/warrenhq/warren/internal/egress"
	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// The node's egress gateway listens on the node's own address at fixed
// ports, the same across the agent's restarts: the table its last run left
// in the kernel keeps sending sandboxes there, and the new run, knowing no
// sandbox until the control plane tells it, refuses them (fail closed).
const (
	GatewayPort = 49991
	DNSPort     = 49992
)

// EgressRules is what a control plane sends a node's agent: every sandbox
// of that node whose egress settings restrict something, and what the
// gateway needs besides. Each PUT replaces the whole set of its instance:
// control planes sharing the node agents (servers with different
// --instance) each keep their own.
type EgressRules struct {
	// Instance names the control plane (its --instance). Required.
	Instance  string          `json:"instance"`
	Sandboxes []EgressSandbox `json:"sandboxes"`
	// DNS are the resolvers (host:port) the gateway forwards the
	// sandboxes' queries to; empty: the node's (its resolv.conf).
	DNS []string `json:"dns,omitempty"`
	// Refuse are networks the gateway never connects into, whatever a
	// sandbox's allowOut says: the cluster's (nodes, pod networks, the API
	// server) and the private ranges, as the pod's own rules refuse them.
	Refuse []netip.Prefix `json:"refuse,omitempty"`
	// TLS intercepts the TLS of sandboxes with header rules; nil: such
	// TLS is refused.
	TLS *EgressTLS `json:"tls,omitempty"`
}

// EgressSandbox is one sandbox pod's address, team and settings.
type EgressSandbox struct {
	ID      string          `json:"id"`
	IP      netip.Addr      `json:"ip"`
	TeamID  string          `json:"teamID"`
	Network sandbox.Network `json:"network"`
	// Resolved are the placeholders of its header rules, by their text.
	Resolved map[string]Resolution `json:"resolved,omitempty"`
}

// NodeEnforced reports whether a sandbox's settings need its node's
// gateway: they deny something, or its TCP goes through the gateway for
// header rules or an egress proxy.
func NodeEnforced(n sandbox.Network) bool { return n.Restricted() || egress.Intercepts(n) }

// validate checks rules as the control plane should have sent them.
func (r EgressRules) validate() error {
	if !validName(r.Instance) {
		return sandbox.Errorf(sandbox.KindInvalid, "instance %q is not valid", r.Instance)
	}
	seen := map[netip.Addr]string{}
	for _, sb := range r.Sandboxes {
		if !validName(sb.ID) {
			return sandbox.Errorf(sandbox.KindInvalid, "sandbox ID %q is not valid", sb.ID)
		}
		if !sb.IP.Is4() {
			return sandbox.Errorf(sandbox.KindInvalid, "sandbox %s: %q is not an IPv4 address", sb.ID, sb.IP)
		}
		if other, ok := seen[sb.IP]; ok {
			return sandbox.Errorf(sandbox.KindInvalid, "sandboxes %s and %s have one address, %s", other, sb.ID, sb.IP)
		}
		seen[sb.IP] = sb.ID
		if err := sb.Network.ValidateEgress(); err != nil {
			return err
		}
	}
	for _, d := range r.DNS {
		if _, err := netip.ParseAddrPort(d); err != nil {
			return sandbox.Errorf(sandbox.KindInvalid, "dns %q is not an address:port", d)
		}
	}
	return nil
}

// validName reports whether s is a sandbox ID or instance name as the
// control plane makes them: 1 to 128 printable ASCII characters, no space.
func validName(s string) bool {
	return s != "" && len(s) <= 128 && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' })
}

// Egress enforces the egress settings of its node's sandbox pods: an
// nftables table of its own in the node's network namespace (see
// nodeTable) sends their TCP and DNS to the gateway (internal/egress) on
// the node's address, which applies allowOut/denyOut/allowInternetAccess,
// the domain rules, header rules (with each instance's CA and the values
// the control plane resolved for its placeholders, egress_secrets.go) and
// egress proxies, and refuses their other packets as the settings
// say. It keeps nothing on disk: the control plane sends every rule again
// after a restart (Sync, Restore), and until then the table the last run
// left stays in the kernel and sends those sandboxes to a gateway that
// refuses them.
type Egress struct {
	addr  netip.Addr
	table string
	gw    *egress.Server
	ports egress.Ports
	log   *slog.Logger
	// write writes a table to the kernel, remove deletes it (when no
	// sandbox is left, so an idle node holds nothing of Warren's); tests
	// replace them.
	write  func(nodeTable) error
	remove func(name string) error

	mu      sync.Mutex              // serialises Set; guards the fields below
	sets    map[string]EgressRules  // by instance
	tls     map[string]*instanceTLS // by instance
	written *nodeTable              // what the kernel holds, as last written; nil: unknown

	byIP atomic.Pointer[map[netip.Addr]egress.Sandbox] // for the gateway
}

// NewEgress starts the gateway on addr (the node's address, which the
// agent's pod shares with the node: hostNetwork) and owns the table named
// for node.
func NewEgress(addr netip.Addr, node string, log *slog.Logger) (*Egress, error) {
	return newEgress(addr, node, log, egress.Ports{Gateway: GatewayPort, DNS: DNSPort})
}

// newEgress is NewEgress at ports (zero: picked by the system, for tests).
func newEgress(addr netip.Addr, node string, log *slog.Logger, ports egress.Ports) (*Egress, error) {
	if !addr.Is4() {
		return nil, fmt.Errorf("egress: the node's address %q is not IPv4", addr)
	}
	e := &Egress{addr: addr, table: TableName(node), log: logkey.For(log, "nodeegress"), write: writeTable, remove: removeTable, sets: map[string]EgressRules{}, tls: map[string]*instanceTLS{}}
	empty := map[netip.Addr]egress.Sandbox{}
	e.byIP.Store(&empty)
	gw, err := egress.New(egress.Config{Policy: e.policy, Logger: log})
	if err != nil {
		return nil, err
	}
	e.ports, err = gw.ListenAt(addr, ports)
	if err != nil {
		return nil, err
	}
	e.gw = gw
	return e, nil
}

func (e *Egress) policy(src netip.Addr) (egress.Sandbox, bool) {
	sb, ok := (*e.byIP.Load())[src]
	return sb, ok
}

// Set replaces the rules of r's instance: the gateway's view first for
// sandboxes that gain rules, the kernel's table, then the gateway's view
// for those that lose them, so no packet meets a table naming a sandbox
// the gateway does not know.
func (e *Egress) Set(r EgressRules) error {
	if err := r.validate(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	sets, tlsOf := maps.Clone(e.sets), maps.Clone(e.tls)
	if len(r.Sandboxes) == 0 {
		delete(sets, r.Instance)
		delete(tlsOf, r.Instance)
	} else {
		it, err := parseTLS(r.TLS, e.tls[r.Instance])
		if err != nil {
			return err
		}
		sets[r.Instance], tlsOf[r.Instance] = r, it
	}
	// The instance being set last: its sandboxes win an address another
	// instance still names (a pod gone, its rules not yet taken away).
	var all []EgressSandbox
	var shut []netip.Prefix
	next := map[netip.Addr]egress.Sandbox{}
	for _, inst := range append(slices.DeleteFunc(slices.Sorted(maps.Keys(sets)), func(i string) bool { return i == r.Instance }), r.Instance) {
		set, ok := sets[inst]
		if !ok {
			continue
		}
		shut = append(shut, set.Refuse...)
		for _, sb := range set.Sandboxes {
			if _, dup := next[sb.IP]; dup {
				all = slices.DeleteFunc(all, func(o EgressSandbox) bool { return o.IP == sb.IP })
			}
			gs := egress.Sandbox{ID: sb.ID, TeamID: sb.TeamID, Network: sb.Network, Upstream: set.DNS, Expander: resolved(sb.Resolved)}
			if it := tlsOf[inst]; it != nil {
				gs.Authority, gs.RootCAs = it.ca, it.roots
			}
			next[sb.IP] = gs
			all = append(all, sb)
		}
	}
	prev := *e.byIP.Load()
	both := maps.Clone(prev)
	maps.Copy(both, next)
	e.byIP.Store(&both)
	e.gw.SetShut(shut)
	t := planTable(e.table, e.addr, e.ports, all, shut)
	if e.written == nil || !t.equal(*e.written) {
		e.written = nil
		write := func() error { return e.write(t) }
		if len(t.sandboxes) == 0 {
			write = func() error { return e.remove(t.name) }
		}
		if err := write(); err != nil {
			e.byIP.Store(&prev)
			return sandbox.Wrap(sandbox.KindInternal, err, "cannot write the node's egress table")
		}
		e.written = &t
		e.log.Info("egress table written", "table", e.table, "instance", r.Instance, "sandboxes", len(all))
	}
	e.sets, e.tls = sets, tlsOf
	e.byIP.Store(&next)
	for ip, sb := range prev {
		if n, ok := next[ip]; !ok || n.ID != sb.ID {
			e.gw.Forget(ip)
		}
	}
	return nil
}

// Close stops the gateway. The table stays: the sandboxes keep their
// rules while the agent is away, and are refused by the closed ports.
func (e *Egress) Close() error { return e.gw.Close() }

// ServeEgress serves PUT /v1/egress (what Client.SetEgress calls) on eg.
func (s *Server) ServeEgress(eg *Egress) {
	s.mux.HandleFunc("PUT /v1/egress", s.authed(func(_ http.ResponseWriter, r *http.Request) (any, error) {
		var rules EgressRules
		dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 32<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rules); err != nil {
			var se *sandbox.Error
			if errors.As(err, &se) {
				return nil, err
			}
			return nil, sandbox.Errorf(sandbox.KindInvalid, "want egress rules as JSON: %v", err)
		}
		return nil, eg.Set(rules)
	}))
}

// sortedSandboxes is the sandboxes by address, for a table that does not
// depend on the order they came in.
func sortedSandboxes(in []EgressSandbox) []EgressSandbox {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b EgressSandbox) int { return a.IP.Compare(b.IP) })
	return out
}
