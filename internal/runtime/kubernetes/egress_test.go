package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/warrenhq/warren/internal/nodeagent"
	"github.com/warrenhq/warren/internal/sandbox"
)

// egressAgents records what each node's agent was sent.
type egressAgents struct {
	mu    sync.Mutex
	nodes []string
	got   map[string][]nodeagent.EgressRules // by node, in order
	fail  map[string]error                   // by node
}

func (a *egressAgents) Nodes(context.Context) ([]string, error) { return a.nodes, nil }

func (a *egressAgents) SetEgress(_ context.Context, node string, r nodeagent.EgressRules) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.fail[node]; err != nil {
		return err
	}
	a.got[node] = append(a.got[node], r)
	return nil
}

// last is the IDs of the sandboxes node was last sent, and how many sends
// it got.
func (a *egressAgents) last(node string) ([]string, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	rs := a.got[node]
	if len(rs) == 0 {
		return nil, 0
	}
	var ids []string
	for _, sb := range rs[len(rs)-1].Sandboxes {
		ids = append(ids, sb.ID)
	}
	return ids, len(rs)
}

// sandboxPod makes a running pod of this server at ip on node, the pod of
// sandbox sbx-NAME with the UID uid-NAME.
func (e *env) sandboxPod(t *testing.T, name, ip, node string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: DefaultNamespace, UID: types.UID("uid-" + name),
		Labels: map[string]string{sandbox.LabelManaged: sandbox.DefaultInstance, sandbox.LabelSandbox: "sbx-" + name}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip}}
	if _, err := e.cli.CoreV1().Pods(DefaultNamespace).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestFirewallSendsOnlyToTheSandboxesNode(t *testing.T) {
	e := newEnv(t)
	e.sandboxPod(t, "warren-a", "10.2.1.5", "node-a")
	e.sandboxPod(t, "warren-b", "10.2.2.5", "node-b")
	agents := &egressAgents{nodes: []string{"node-a", "node-b"}, got: map[string][]nodeagent.EgressRules{}, fail: map[string]error{}}
	fw := newFirewall(t, e.rt, agents, FirewallConfig{DNS: []string{"127.0.0.1:5353"}})
	ctx := t.Context()
	closed := sandbox.Network{DenyOut: []string{"0.0.0.0/0"}, AllowOut: []string{"api.example.com"}}
	open := sandbox.Network{AllowInternetAccess: true}

	// Settings that restrict nothing cost no call.
	if err := fw.Apply(ctx, "sbx-open", sandbox.Egress{IP: netip.MustParseAddr("10.2.1.5"), Network: open}); err != nil {
		t.Fatal(err)
	}
	if len(agents.got) != 0 {
		t.Fatalf("an open sandbox sent: %v", agents.got)
	}
	if err := fw.Apply(ctx, "sbx-a", sandbox.Egress{IP: netip.MustParseAddr("10.2.1.5"), TeamID: "t", Network: closed}); err != nil {
		t.Fatal(err)
	}
	if ids, n := agents.last("node-a"); !slices.Equal(ids, []string{"sbx-a"}) || n != 1 {
		t.Fatalf("node-a got %v (%d sends)", ids, n)
	}
	if _, n := agents.last("node-b"); n != 0 {
		t.Fatal("node-b was sent node-a's sandbox")
	}
	r := agents.got["node-a"][0]
	if !slices.Equal(r.DNS, []string{"127.0.0.1:5353"}) || !slices.Contains(r.Refuse, netip.MustParsePrefix("10.0.0.0/8")) {
		t.Errorf("what the gateway needs besides: %+v", r)
	}
	if diff := cmp.Diff(closed, r.Sandboxes[0].Network); diff != "" || r.Sandboxes[0].TeamID != "t" {
		t.Errorf("sandbox sent (-want +got):\n%s", diff)
	}

	// A node that does not take them fails the apply, which changes nothing.
	agents.fail["node-b"] = sandbox.Errorf(sandbox.KindUnavailable, "node agent down")
	if err := fw.Apply(ctx, "sbx-b", sandbox.Egress{IP: netip.MustParseAddr("10.2.2.5"), Network: closed}); sandbox.KindOf(err) != sandbox.KindUnavailable {
		t.Fatalf("apply on a node whose agent is down: %v", err)
	}
	delete(agents.fail, "node-b")
	if err := fw.Apply(ctx, "sbx-b", sandbox.Egress{IP: netip.MustParseAddr("10.2.2.5"), Network: closed}); err != nil {
		t.Fatal(err)
	}
	if ids, _ := agents.last("node-b"); !slices.Equal(ids, []string{"sbx-b"}) {
		t.Fatalf("node-b got %v", ids)
	}

	// An update that opens everything takes the rules away.
	if err := fw.Apply(ctx, "sbx-a", sandbox.Egress{IP: netip.MustParseAddr("10.2.1.5"), Network: open}); err != nil {
		t.Fatal(err)
	}
	if ids, n := agents.last("node-a"); len(ids) != 0 || n != 2 {
		t.Fatalf("node-a after the update: %v (%d sends)", ids, n)
	}

	// Restore sends every node its set again (a node agent that restarted).
	if err := fw.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if ids, n := agents.last("node-b"); !slices.Equal(ids, []string{"sbx-b"}) || n != 2 {
		t.Fatalf("node-b after Restore: %v (%d sends)", ids, n)
	}
	if err := fw.Remove(ctx, "sbx-b"); err != nil {
		t.Fatal(err)
	}
	if ids, _ := agents.last("node-b"); len(ids) != 0 {
		t.Fatalf("node-b after Remove: %v", ids)
	}

	// Sync from the store: rules of pods that are gone are dropped.
	err := fw.Sync(ctx, map[string]sandbox.Egress{
		"sbx-b":    {IP: netip.MustParseAddr("10.2.2.5"), Network: closed},
		"sbx-gone": {IP: netip.MustParseAddr("10.2.9.9"), Network: closed},
	})
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := agents.last("node-b"); !slices.Equal(ids, []string{"sbx-b"}) {
		t.Fatalf("node-b after Sync: %v", ids)
	}
}

func TestFirewallRefusesWhatNodesCannotEnforce(t *testing.T) {
	e := newEnv(t)
	agents := &egressAgents{got: map[string][]nodeagent.EgressRules{}}
	fw := newFirewall(t, e.rt, agents, FirewallConfig{PublicProxiesOnly: true})
	for name, n := range map[string]sandbox.Network{
		"private egress proxy": {EgressProxy: &sandbox.EgressProxy{Address: "10.0.0.1:1080"}},
		"denied domain":        {DenyOut: []string{"example.com"}},
	} {
		err := fw.Apply(t.Context(), "sbx", sandbox.Egress{IP: netip.MustParseAddr("10.2.1.5"), Network: n})
		var se *sandbox.Error
		if !errors.As(err, &se) || se.Kind != sandbox.KindInvalid {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(agents.got) != 0 {
		t.Errorf("sent: %v", agents.got)
	}
}

func newFirewall(t *testing.T, rt *Runtime, agents EgressAgents, cfg FirewallConfig) *Firewall {
	t.Helper()
	fw := NewFirewall(rt, agents, cfg)
	t.Cleanup(func() { fw.Close() })
	return fw
}

// expander resolves ${e2b.secrets.NAME} to the team's value in secrets,
// as the secrets service would.
type expander struct {
	mu      sync.Mutex
	secrets map[string]string // by team/name
}

func (x *expander) Expand(_ context.Context, _, team, value string) (string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return sandbox.ExpandPlaceholders(value, func(p sandbox.Placeholder) (string, error) {
		v, ok := x.secrets[team+"/"+p.Name]
		if !ok {
			return "", fmt.Errorf("placeholder %s does not resolve: no secret", p.Text)
		}
		return v, nil
	})
}

func (x *expander) set(key, value string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if value == "" {
		delete(x.secrets, key)
	} else {
		x.secrets[key] = value
	}
}

// TestFirewallHeaderRules: a sandbox with header rules goes to its node
// with its placeholders resolved and the CA; a node without such a
// sandbox never gets the CA; a secret's change is sent before
// SecretsChanged returns, and only to the nodes that need it.
func TestFirewallHeaderRules(t *testing.T) {
	e := newEnv(t)
	e.sandboxPod(t, "warren-a", "10.2.1.5", "node-a")
	e.sandboxPod(t, "warren-b", "10.2.2.5", "node-b")
	agents := &egressAgents{nodes: []string{"node-a", "node-b"}, got: map[string][]nodeagent.EgressRules{}, fail: map[string]error{}}
	fw := newFirewall(t, e.rt, agents, FirewallConfig{Roots: "roots"})
	caPEM, err := fw.LoadCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	rules := sandbox.Network{AllowInternetAccess: true, Rules: map[string][]sandbox.NetworkRule{
		"api.example.com": {{Headers: map[string]string{"A": "Bearer ${e2b.secrets.k}", "B": "${e2b.secrets.gone}"}}}}}
	// Without the secrets service, nothing resolves.
	if err := fw.Apply(ctx, "sbx-a", sandbox.Egress{IP: netip.MustParseAddr("10.2.1.5"), TeamID: "t", Network: rules}); err != nil {
		t.Fatal(err)
	}
	if got := agents.got["node-a"][0].Sandboxes[0].Resolved["${e2b.secrets.k}"]; got.Value != "" || !strings.Contains(got.Refusal, "cannot be resolved") {
		t.Errorf("without an expander: %+v", got)
	}
	x := &expander{secrets: map[string]string{"t/k": "v1"}}
	fw.SetExpander(x)
	if err := fw.Apply(ctx, "sbx-a", sandbox.Egress{IP: netip.MustParseAddr("10.2.1.5"), TeamID: "t", Network: rules}); err != nil {
		t.Fatal(err)
	}
	if err := fw.Apply(ctx, "sbx-b", sandbox.Egress{IP: netip.MustParseAddr("10.2.2.5"), TeamID: "t", Network: sandbox.Network{DenyOut: []string{"0.0.0.0/0"}}}); err != nil {
		t.Fatal(err)
	}
	resolvedOf := func(node string) map[string]nodeagent.Resolution {
		rs := agents.got[node]
		return rs[len(rs)-1].Sandboxes[0].Resolved
	}
	want := map[string]nodeagent.Resolution{"${e2b.secrets.k}": {Value: "v1"}, "${e2b.secrets.gone}": {Refusal: "placeholder ${e2b.secrets.gone} does not resolve: no secret"}}
	if diff := cmp.Diff(want, resolvedOf("node-a")); diff != "" {
		t.Errorf("resolved (-want +got):\n%s", diff)
	}
	last := agents.got["node-a"][len(agents.got["node-a"])-1]
	if last.TLS == nil || last.TLS.CACert != caPEM || last.TLS.Roots != "roots" {
		t.Errorf("node-a's TLS: %+v", last.TLS)
	}
	if tls := agents.got["node-b"][0].TLS; tls != nil {
		t.Error("a node without a sandbox with header rules got the CA")
	}

	_, sentA := agents.last("node-a")
	_, sentB := agents.last("node-b")
	x.set("t/k", "v2")
	if err := fw.SecretsChanged(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if got := resolvedOf("node-a")["${e2b.secrets.k}"]; got.Value != "v2" {
		t.Errorf("after the change: %+v", got)
	}
	x.set("t/k", "")
	if err := fw.SecretsChanged(ctx, "other-team"); err != nil {
		t.Fatal(err)
	}
	if _, n := agents.last("node-a"); n != sentA+1 {
		t.Errorf("another team's change was sent: %d sends, %d before", n, sentA)
	}
	if err := fw.SecretsChanged(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if got := resolvedOf("node-a")["${e2b.secrets.k}"]; got.Value != "" || got.Refusal == "" {
		t.Errorf("after the delete: %+v", got)
	}
	if _, n := agents.last("node-b"); n != sentB {
		t.Error("node-b, whose sandbox names no secret, was sent the change")
	}
}
