package kubernetes

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

func addNode(t *testing.T, e *env, name, ip, podCIDR string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:   corev1.NodeSpec{PodCIDRs: []string{podCIDR}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}}}}
	if _, err := e.cli.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The isolator runs first, alone with NET_ADMIN, and refuses the nodes'
// addresses and pod networks and the API server beside the defaults.
func TestPodIsIsolatedFirst(t *testing.T) {
	e := newEnv(t)
	e.rt.cfg.Refuse = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	e.rt.cfg.APIServerHost = "203.0.113.9"
	addNode(t, e, "node-a", "203.0.113.1", "203.0.114.0/24")
	addNode(t, e, "node-b", "10.1.2.3", "10.244.1.0/24")
	e.started(t, "iso")
	p, err := e.cli.CoreV1().Pods(DefaultNamespace).Get(t.Context(), PodName("iso"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inits := p.Spec.InitContainers
	if len(inits) != 1 || inits[0].Name != initContainer {
		t.Fatalf("init containers %v: want one, isolating the pod, then installing the agent", inits)
	}
	iso := inits[0]
	// node-b's addresses are private, which the isolator refuses anyway.
	want := []string{"node", "isolate", "--agent-port", "49983", "--install-agent", AgentMountPath, "--refuse",
		"198.51.100.0/24,203.0.113.1/32,203.0.113.9/32,203.0.114.0/24"}
	if !slices.Equal(iso.Args, want) || iso.Command[0] != AgentImageBinary {
		t.Errorf("isolator runs %v %v, want %v", iso.Command, iso.Args, want)
	}
	sc := iso.SecurityContext
	if !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN"}) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		*sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("isolator's security context: %+v", sc)
	}
	if slices.Contains(p.Spec.Containers[0].SecurityContext.Capabilities.Add, "NET_ADMIN") {
		t.Error("the sandbox container has NET_ADMIN: it could undo its isolation")
	}
	// A pod made again (a stopped sandbox's record, maybe of an older
	// server, whose init container only installed the agent) gets the
	// isolating one instead.
	p.Spec.InitContainers = []corev1.Container{{Name: "warren-agent", Command: []string{AgentImageBinary, "node", "install-agent", AgentMountPath}}}
	if isolated(p) {
		t.Error("a pod without the isolating init container counts as isolated")
	}
	e.rt.isolate(p, nil)
	if len(p.Spec.InitContainers) != 1 || !isolated(p) || len(p.Spec.InitContainers[0].Args) != 6 {
		t.Errorf("made again: %v", p.Spec.InitContainers)
	}
}

// A gVisor pod's isolator programs gVisor's netstack with iptables, for
// which it needs NET_RAW beside NET_ADMIN; its sandbox has neither, as in
// a runc pod.
func TestGVisorPodIsIsolatedWithIPTables(t *testing.T) {
	e := newEnv(t)
	g := spec("igv")
	g.Runtime = sandbox.RuntimeGVisor
	p := e.rt.podFor(g)
	e.rt.isolate(p, []netip.Prefix{netip.MustParsePrefix("203.0.113.1/32")})
	iso := p.Spec.InitContainers[0]
	want := []string{"node", "isolate", "--agent-port", "49983", "--install-agent", AgentMountPath,
		"--backend", "iptables", "--refuse", "203.0.113.1/32"}
	if !slices.Equal(iso.Args, want) {
		t.Errorf("isolator runs %v, want %v", iso.Args, want)
	}
	if add := iso.SecurityContext.Capabilities.Add; !slices.Equal(add, []corev1.Capability{"NET_ADMIN", "NET_RAW"}) {
		t.Errorf("isolator's capabilities %v, want NET_ADMIN and NET_RAW", add)
	}
	runc := e.rt.podFor(spec("irunc"))
	if !slices.Equal(p.Spec.Containers[0].SecurityContext.Capabilities.Add, runc.Spec.Containers[0].SecurityContext.Capabilities.Add) {
		t.Errorf("a gVisor sandbox's capabilities %v differ from a runc one's %v",
			p.Spec.Containers[0].SecurityContext.Capabilities.Add, runc.Spec.Containers[0].SecurityContext.Capabilities.Add)
	}
	if !slices.Equal(runc.Spec.InitContainers[0].SecurityContext.Capabilities.Add, []corev1.Capability{"NET_ADMIN"}) {
		t.Errorf("a runc pod's isolator has %v", runc.Spec.InitContainers[0].SecurityContext.Capabilities.Add)
	}
}

// Without the nodes' addresses, no pod is made: on a cluster of public
// addresses the defaults would not cover them.
func TestNoPodWithoutTheClusterNetworks(t *testing.T) {
	e := newEnv(t)
	e.cli.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	_, err := e.rt.Create(t.Context(), spec("nonet"))
	if err == nil {
		t.Fatal("a pod was made without knowing the nodes")
	}
	if _, gerr := e.cli.CoreV1().Pods(DefaultNamespace).Get(t.Context(), PodName("nonet"), metav1.GetOptions{}); gerr == nil {
		t.Error("the pod exists")
	}
	if sandbox.KindOf(err) != sandbox.KindInternal {
		t.Errorf("error %v", err)
	}
}

// Every address of the nodes' hosts (which their agents tell, though no
// Node object lists them), the API server's endpoints behind its name and
// the Service ranges are refused too; what the defaults or a wider
// network cover does not lengthen the pod's spec.
func TestPodRefusesTheHostsAPIServerEndpointsAndServiceRanges(t *testing.T) {
	e := newEnv(t)
	addNode(t, e, "node-a", "203.0.113.1", "203.0.114.0/24")
	e.nodes.addrs = map[string][]netip.Addr{"node-a": {
		netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fe80::fc:ff:fe00:1"),
		netip.MustParseAddr("2001:db8::2"), netip.MustParseAddr("10.246.1.1"), netip.MustParseAddr("203.0.113.1"),
		// kube-proxy's IPVS mode gives the host every Service address.
		netip.MustParseAddr("203.0.120.7"),
	}}
	ready := true
	if _, err := e.cli.DiscoveryV1().EndpointSlices("default").Create(t.Context(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"198.51.100.20"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cli.NetworkingV1().ServiceCIDRs().Create(t.Context(), &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"203.0.120.0/24", "fd00:10:96::/112"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.started(t, "hosts")
	p, err := e.cli.CoreV1().Pods(DefaultNamespace).Get(t.Context(), PodName("hosts"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args := p.Spec.InitContainers[0].Args
	want := "192.0.2.2/32,198.51.100.20/32,2001:db8::2/128,203.0.113.1/32,203.0.114.0/24,203.0.120.0/24"
	if args[len(args)-2] != "--refuse" || args[len(args)-1] != want {
		t.Errorf("isolator runs %v, want --refuse %s", args, want)
	}
}

// A node agent that never told its host's addresses keeps every sandbox
// pod from being made (one on any node could reach them); once it told
// them, they are refused on its last word while it cannot answer.
func TestNoPodWithoutEveryHostsAddresses(t *testing.T) {
	e := newEnv(t)
	addNode(t, e, "node-a", "10.1.2.3", "10.244.1.0/24")
	e.nodes.addrsErr = sandbox.Errorf(sandbox.KindUnavailable, "the node agent of the sandbox's node is unreachable")
	_, err := e.rt.Create(t.Context(), spec("nohosts"))
	if sandbox.KindOf(err) != sandbox.KindUnavailable {
		t.Fatalf("created without node-a's addresses: %v", err)
	}
	if _, gerr := e.cli.CoreV1().Pods(DefaultNamespace).Get(t.Context(), PodName("nohosts"), metav1.GetOptions{}); gerr == nil {
		t.Error("the pod exists")
	}

	// An agent older than the server has no such call: it is told how
	// to fix it.
	e.nodes.mu.Lock()
	e.nodes.addrsErr = sandbox.Errorf(sandbox.KindNotFound, "the node agent refused: 404")
	e.nodes.mu.Unlock()
	if _, err := e.rt.Create(t.Context(), spec("oldagent")); sandbox.KindOf(err) != sandbox.KindUnavailable ||
		!strings.Contains(sandbox.Message(err), "update the warren-node DaemonSet") {
		t.Errorf("with an older node agent: %v", err)
	}

	e.nodes.mu.Lock()
	e.nodes.addrsErr = nil
	e.nodes.addrs = map[string][]netip.Addr{"node-a": {netip.MustParseAddr("192.0.2.2")}}
	e.nodes.mu.Unlock()
	want := []netip.Prefix{netip.MustParsePrefix("192.0.2.2/32")}
	if got, err := e.rt.refused(t.Context()); err != nil || !slices.Equal(got, want) {
		t.Fatalf("refused %v, %v; want %v", got, err, want)
	}
	e.nodes.mu.Lock()
	e.nodes.addrsErr = errors.New("connection refused")
	e.nodes.mu.Unlock()
	e.rt.cluster.mu.Lock()
	e.rt.cluster.at = time.Now().Add(-clusterNetworksTTL) // listed long ago
	e.rt.cluster.mu.Unlock()
	if got, err := e.rt.refused(t.Context()); err != nil || !slices.Equal(got, want) {
		t.Errorf("with node-a's agent down: refused %v, %v; want its last word %v", got, err, want)
	}
}

// The API server's endpoints and the Service ranges are read with the
// permissions of deploy/kubernetes/rbac.yaml: without them no pod is
// made; a cluster without ServiceCIDRs (before Kubernetes 1.33) has none.
func TestAPIServerEndpointsAndServiceRangesNeedReading(t *testing.T) {
	e := newEnv(t)
	e.cli.PrependReactor("list", "servicecidrs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"}, "")
	})
	if _, err := e.rt.refused(t.Context()); err != nil {
		t.Fatalf("without the ServiceCIDR API: %v", err)
	}

	e = newEnv(t)
	e.cli.PrependReactor("get", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "kubernetes", errors.New("RBAC"))
	})
	if _, err := e.rt.Create(t.Context(), spec("noeps")); sandbox.KindOf(err) != sandbox.KindInternal || !strings.Contains(err.Error(), "EndpointSlice kubernetes") {
		t.Errorf("without reading the API server's endpoints: %v", err)
	}
}
