package kubernetes

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
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
// names the pod there (its cgroup). The image methods act on the node's
// containerd (namespace k8s.io, where the kubelet finds images), as
// nodeagent.Client documents them.
type NodeAgents interface {
	// Nodes names the nodes a node agent runs on: those images can be
	// brought to, and so the only ones a sandbox's pod may run on.
	Nodes(ctx context.Context) ([]string, error)
	Freeze(ctx context.Context, node, podUID string) error
	Thaw(ctx context.Context, node, podUID string) error
	SetPidsLimit(ctx context.Context, node, podUID string, limit int) error
	// SpareAgent has the OOM killer take the pod's users' processes
	// before its sandbox's init and agent.
	SpareAgent(ctx context.Context, node, podUID string) error
	Stats(ctx context.Context, node, podUID string) (nodeagent.Stats, error)
	// Addresses are the addresses of node's host, on every interface:
	// those no Node object lists too, which sandbox pods are refused.
	Addresses(ctx context.Context, node string) ([]netip.Addr, error)

	ImportImage(ctx context.Context, node string, tar io.Reader) ([]nodeagent.Image, error)
	Images(ctx context.Context, node string) ([]nodeagent.Image, error)
	RemoveImage(ctx context.Context, node, ref string) error
	ExportImage(ctx context.Context, node, ref string) (io.ReadCloser, error)
	Commit(ctx context.Context, node, podUID, container, ref string, labels map[string]string) (nodeagent.Image, error)
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

// Nodes lists the nodes whose agent pod runs.
func (n *NodeAgentPods) Nodes(ctx context.Context) ([]string, error) {
	pods, err := n.cli.CoreV1().Pods(n.ns).List(ctx, metav1.ListOptions{LabelSelector: NodeAgentLabel})
	if err != nil {
		return nil, classify(err, "cannot list the node agents")
	}
	var out []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			out = append(out, p.Spec.NodeName)
		}
	}
	return out, nil
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

func (n *NodeAgentPods) SpareAgent(ctx context.Context, node, uid string) error {
	return n.call(ctx, node, func(a string) error { return n.client.SpareAgent(ctx, a, uid) })
}

func (n *NodeAgentPods) Stats(ctx context.Context, node, uid string) (nodeagent.Stats, error) {
	var s nodeagent.Stats
	err := n.call(ctx, node, func(a string) (err error) {
		s, err = n.client.Stats(ctx, a, uid)
		return err
	})
	return s, err
}

func (n *NodeAgentPods) Addresses(ctx context.Context, node string) ([]netip.Addr, error) {
	var out []netip.Addr
	err := n.call(ctx, node, func(a string) (err error) {
		out, err = n.client.Addresses(ctx, a)
		return err
	})
	return out, err
}

// ImportImage is not retried: the stream is consumed by the first try.
// The address is forgotten when the agent is unreachable, so the caller's
// next try finds it again.
func (n *NodeAgentPods) ImportImage(ctx context.Context, node string, tar io.Reader) ([]nodeagent.Image, error) {
	a, err := n.addr(ctx, node)
	if err != nil {
		return nil, err
	}
	imgs, err := n.client.ImportImage(ctx, a, tar)
	if sandbox.KindOf(err) == sandbox.KindUnavailable {
		n.mu.Lock()
		delete(n.addrs, node)
		n.mu.Unlock()
	}
	return imgs, err
}

func (n *NodeAgentPods) Images(ctx context.Context, node string) ([]nodeagent.Image, error) {
	var out []nodeagent.Image
	err := n.call(ctx, node, func(a string) (err error) {
		out, err = n.client.Images(ctx, a)
		return err
	})
	return out, err
}

func (n *NodeAgentPods) RemoveImage(ctx context.Context, node, ref string) error {
	return n.call(ctx, node, func(a string) error { return n.client.RemoveImage(ctx, a, ref) })
}

func (n *NodeAgentPods) ExportImage(ctx context.Context, node, ref string) (io.ReadCloser, error) {
	var out io.ReadCloser
	err := n.call(ctx, node, func(a string) (err error) {
		out, err = n.client.ExportImage(ctx, a, ref)
		return err
	})
	return out, err
}

func (n *NodeAgentPods) Commit(ctx context.Context, node, uid, container, ref string, labels map[string]string) (nodeagent.Image, error) {
	var img nodeagent.Image
	err := n.call(ctx, node, func(a string) (err error) {
		img, err = n.client.Commit(ctx, a, uid, container, ref, labels)
		return err
	})
	return img, err
}

// PodNetworks returns the pod networks (spec.podCIDRs) of the nodes with
// a node agent: where the cluster's pods, sandboxes and others, have their
// addresses. Template builds run beside the control plane, on the Docker
// engine, and must not reach them. Without node agents it knows no node
// and returns none.
func (r *Runtime) PodNetworks(ctx context.Context) ([]netip.Prefix, error) {
	if r.cfg.Nodes == nil {
		return nil, nil
	}
	nodes, err := r.agentNodes(ctx)
	if err != nil {
		return nil, err
	}
	var nets []netip.Prefix
	for _, name := range nodes {
		n, err := r.cli.CoreV1().Nodes().Get(ctx, name, metaGet)
		if err != nil {
			return nil, classify(err, "cannot read node "+name)
		}
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		for _, c := range cidrs {
			if p, err := netip.ParsePrefix(c); err == nil {
				nets = append(nets, p.Masked())
			}
		}
	}
	return nets, nil
}

// ForwardVolume sends a volume content request to node's agent (not
// retried: the body is consumed by the first try) and returns its answer
// whatever its status; the caller closes its body.
func (n *NodeAgentPods) ForwardVolume(ctx context.Context, node, method, path, rawQuery string, header http.Header, body io.Reader) (*http.Response, error) {
	a, err := n.addr(ctx, node)
	if err != nil {
		return nil, err
	}
	res, err := n.client.Forward(ctx, a, method, path, rawQuery, header, body)
	if sandbox.KindOf(err) == sandbox.KindUnavailable {
		n.mu.Lock()
		delete(n.addrs, node)
		n.mu.Unlock()
	}
	return res, err
}

// VolumeUsage is the size of the files of node's volume name, served at
// prefix (nodeagent.VolumesPrefix or SharedVolumesPrefix).
func (n *NodeAgentPods) VolumeUsage(ctx context.Context, node, prefix, name string) (int64, error) {
	var used int64
	err := n.call(ctx, node, func(a string) (err error) {
		used, err = n.client.VolumeUsage(ctx, a, prefix, name)
		return err
	})
	return used, err
}
