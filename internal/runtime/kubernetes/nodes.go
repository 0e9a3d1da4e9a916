package kubernetes

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/warrenhq/warren/internal/nodeagent"
	"github.com/warrenhq/warren/internal/sandbox"
)

// NodeAgents does on a pod's node what the Kubernetes API cannot. podUID
// names the pod there (its cgroup).
type NodeAgents interface {
	Freeze(ctx context.Context, node, podUID string) error
	Thaw(ctx context.Context, node, podUID string) error
	SetPidsLimit(ctx context.Context, node, podUID string, limit int) error
	Stats(ctx context.Context, node, podUID string) (nodeagent.Stats, error)
}

// NodeAgentLabel selects the node agent's pods (deploy/kubernetes/).
const NodeAgentLabel = "app.kubernetes.io/name=warren-node"

// NodeAgentPods reaches the node agent of a node at its pod's IP, as the
// DaemonSet of deploy/kubernetes/ runs it: found by NodeAgentLabel and
// the node's name, remembered until a call to it fails.
type NodeAgentPods struct {
	cli    k8s.Interface
	ns     string
	client *nodeagent.Client

	mu    sync.Mutex
	addrs map[string]string // node name → agent host:port
}

var _ NodeAgents = (*NodeAgentPods)(nil)

// NewNodeAgentPods finds node agents in namespace ns and calls them with
// token.
func NewNodeAgentPods(cli k8s.Interface, ns, token string) *NodeAgentPods {
	return &NodeAgentPods{cli: cli, ns: ns, client: nodeagent.NewClient(token), addrs: map[string]string{}}
}

// addr returns the address of node's agent.
func (n *NodeAgentPods) addr(ctx context.Context, node string) (string, error) {
	n.mu.Lock()
	a, ok := n.addrs[node]
	n.mu.Unlock()
	if ok {
		return a, nil
	}
	pods, err := n.cli.CoreV1().Pods(n.ns).List(ctx, metav1.ListOptions{
		LabelSelector: NodeAgentLabel,
		FieldSelector: "spec.nodeName=" + node,
	})
	if err != nil {
		return "", classify(err, "cannot find the node agent of the sandbox's node")
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			a = net.JoinHostPort(p.Status.PodIP, strconv.Itoa(nodeagent.Port))
			n.mu.Lock()
			n.addrs[node] = a
			n.mu.Unlock()
			return a, nil
		}
	}
	return "", sandbox.Errorf(sandbox.KindUnavailable, "no node agent runs on node %s: is the warren-node DaemonSet of deploy/kubernetes/ applied?", node)
}

// call runs op against node's agent, finding it again once if the one
// remembered is gone (its pod restarted with a new IP).
func (n *NodeAgentPods) call(ctx context.Context, node string, op func(addr string) error) error {
	for try := 0; ; try++ {
		a, err := n.addr(ctx, node)
		if err != nil {
			return err
		}
		err = op(a)
		if sandbox.KindOf(err) != sandbox.KindUnavailable || try > 0 {
			return err
		}
		n.mu.Lock()
		delete(n.addrs, node)
		n.mu.Unlock()
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (n *NodeAgentPods) Freeze(ctx context.Context, node, uid string) error {
	return n.call(ctx, node, func(a string) error { return n.client.Freeze(ctx, a, uid) })
}

func (n *NodeAgentPods) Thaw(ctx context.Context, node, uid string) error {
	return n.call(ctx, node, func(a string) error { return n.client.Thaw(ctx, a, uid) })
}

func (n *NodeAgentPods) SetPidsLimit(ctx context.Context, node, uid string, limit int) error {
	return n.call(ctx, node, func(a string) error { return n.client.SetPidsLimit(ctx, a, uid, limit) })
}

func (n *NodeAgentPods) Stats(ctx context.Context, node, uid string) (nodeagent.Stats, error) {
	var s nodeagent.Stats
	err := n.call(ctx, node, func(a string) (err error) {
		s, err = n.client.Stats(ctx, a, uid)
		return err
	})
	return s, err
}
