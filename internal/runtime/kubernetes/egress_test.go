package kubernetes

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// sandboxPod makes a running pod of this server at ip on node.
func (e *env) sandboxPod(t *testing.T, name, ip, node string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: DefaultNamespace,
		Labels: map[string]string{sandbox.LabelManaged: sandbox.DefaultInstance}},
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
	fw := NewFirewall(e.rt, agents, []string{"127.0.0.1:5353"}, nil)
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
	fw := NewFirewall(e.rt, agents, nil, nil)
	for name, n := range map[string]sandbox.Network{
		"header rules":  {Rules: map[string][]sandbox.NetworkRule{"api.example.com": {{Headers: map[string]string{"A": "b"}}}}},
		"egress proxy":  {EgressProxy: &sandbox.EgressProxy{Address: "proxy:1080"}},
		"denied domain": {DenyOut: []string{"example.com"}},
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
