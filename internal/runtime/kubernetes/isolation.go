package kubernetes

import (
	"context"
	"maps"
	"net"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warrenhq/warren/internal/podnet"
	"github.com/warrenhq/warren/internal/sandbox"
)

// initContainer is the one init container of every sandbox pod: `warren
// node isolate` (internal/podnet) programs the pod's network namespace,
// then copies the agent into the volume the sandbox container runs it
// from. The kubelet starts the sandbox only once it succeeded, so no agent
// runs in a pod that is not isolated. It alone has a capability,
// CAP_NET_ADMIN; the sandbox container, which lacks it, cannot undo the
// rules. One container rather than two: each costs a container start on
// every create. In a gVisor pod it programs gVisor's netstack, which all
// the pod's containers share, through iptables (podnet.ApplyIPTables),
// and needs CAP_NET_RAW too.
const initContainer = "warren-init"

// clusterNetworksTTL is how long the nodes' addresses and pod networks
// are reused before they are listed again.
const clusterNetworksTTL = 30 * time.Second

// hostAddressesTimeout bounds the wait for one node agent's addresses.
const hostAddressesTimeout = 5 * time.Second

// clusterNetworks caches what every sandbox pod is refused beside
// podnet.DefaultRefused: the nodes' addresses (their kubelets, node
// agents, anything they serve), every address of their hosts (which the
// Node objects do not list: a second interface, a bridge), their pod
// networks, the Service ranges and the API server's addresses, which on a
// cluster of public addresses the defaults miss.
type clusterNetworks struct {
	mu     sync.Mutex // guards the fields below
	nets   []netip.Prefix
	at     time.Time      // of the last listing of the API's objects; zero: none yet
	listed []netip.Prefix // the API's part of nets, as listed then
	// hosts are each node's host's addresses, as its agent last told
	// them: kept while the agent restarts, dropped with the Node.
	hosts map[string][]netip.Prefix
}

// refused returns the cluster's networks to refuse, listed again when
// older than clusterNetworksTTL. A failed listing of the API's objects
// reuses the last one; with none, the pod is not made: a sandbox on a
// cluster of public addresses would otherwise reach its nodes. Nor is it
// while a node agent never told its host's addresses.
func (r *Runtime) refused(ctx context.Context) ([]netip.Prefix, error) {
	c := &r.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < clusterNetworksTTL {
		return c.nets, nil
	}
	listed, nodes, err := r.listClusterNetworks(ctx)
	if err != nil {
		if c.at.IsZero() {
			return nil, err
		}
		r.log.WarnContext(ctx, "cannot list the cluster's networks, isolating sandboxes from those listed before", "err", err)
		listed, nodes = c.listed, nil
	}
	hosts, err := r.hostAddresses(ctx, nodes)
	if err != nil {
		return nil, err
	}
	nets := uncovered(append(slices.Clone(listed), hosts...))
	if nodes != nil {
		c.listed, c.at = listed, time.Now()
	}
	c.nets = nets
	return nets, nil
}

// listClusterNetworks lists what the API tells of the networks sandboxes
// must not reach: the nodes' addresses and pod networks, the API server's
// (as the client names it, and its endpoints), the Service ranges, and
// Config.Refuse. It returns the nodes' names too.
func (r *Runtime) listClusterNetworks(ctx context.Context) ([]netip.Prefix, []string, error) {
	nodes, err := r.cli.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, classify(err, "cannot list the cluster's nodes, which sandboxes must not reach")
	}
	nets := slices.Clone(r.cfg.Refuse)
	names := []string{}
	for _, n := range nodes.Items {
		nets = append(nets, nodeNetworks(&n)...)
		names = append(names, n.Name)
	}
	nets = append(nets, r.apiServer(ctx)...)
	eps, err := r.apiServerEndpoints(ctx)
	if err != nil {
		return nil, nil, err
	}
	svcs, err := r.serviceCIDRs(ctx)
	if err != nil {
		return nil, nil, err
	}
	return append(append(nets, eps...), svcs...), names, nil
}

// hostAddresses returns the addresses of the hosts of the nodes with a
// node agent, asked of each (nodeagent's GET /v1/addresses), with those of
// the hosts whose agents told them before (while an agent restarts, its
// node keeps its pods). An agent that cannot answer now is taken at its
// last word; one that never answered fails the listing: its node may hold
// an address that no Node object lists, and pods on every node would
// reach it. nodes are the cluster's, whose hosts are kept; nil: keep all.
func (r *Runtime) hostAddresses(ctx context.Context, nodes []string) ([]netip.Prefix, error) {
	c := &r.cluster
	if c.hosts == nil {
		c.hosts = map[string][]netip.Prefix{}
	}
	if nodes != nil {
		maps.DeleteFunc(c.hosts, func(n string, _ []netip.Prefix) bool { return !slices.Contains(nodes, n) })
	}
	if r.cfg.Nodes != nil {
		agents, err := r.agentNodes(ctx)
		if err != nil {
			return nil, sandbox.Wrap(sandbox.KindOf(err), err, "cannot list the node agents, which tell their nodes' addresses that sandboxes must not reach")
		}
		got := make([][]netip.Addr, len(agents))
		errs := make([]error, len(agents))
		var wg sync.WaitGroup
		for i, n := range agents {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(ctx, hostAddressesTimeout)
				defer cancel()
				got[i], errs[i] = r.cfg.Nodes.Addresses(ctx, n)
			})
		}
		wg.Wait()
		for i, n := range agents {
			if errs[i] == nil {
				c.hosts[n] = hostPrefixes(got[i])
				continue
			}
			if _, ok := c.hosts[n]; !ok {
				msg := "cannot learn the addresses of node " + n + " from its node agent, which sandboxes must not reach"
				if sandbox.KindOf(errs[i]) == sandbox.KindNotFound {
					msg = "the node agent of node " + n + " is older than this server and cannot tell its host's addresses, which sandboxes must not reach: update the warren-node DaemonSet's image"
				}
				return nil, sandbox.Wrap(sandbox.KindUnavailable, errs[i], msg)
			}
			r.log.WarnContext(ctx, "cannot learn a node's addresses from its agent, refusing those it told before", "node", n, "err", errs[i])
		}
	}
	var out []netip.Prefix
	for _, n := range slices.Sorted(maps.Keys(c.hosts)) {
		out = append(out, c.hosts[n]...)
	}
	return out, nil
}

// hostPrefixes are addrs, each a network of its own.
func hostPrefixes(addrs []netip.Addr) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(addrs))
	for _, a := range addrs {
		if a.IsValid() {
			a = a.Unmap().WithZone("")
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}

// apiServerEndpoints returns the addresses the API server really serves
// on, behind its name or load balancer: those of the EndpointSlice of the
// Service kubernetes in namespace default, which the API server keeps.
// None where it keeps none.
func (r *Runtime) apiServerEndpoints(ctx context.Context) ([]netip.Prefix, error) {
	s, err := r.cli.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctx, "kubernetes", metaGet)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, classify(err, "cannot read the API server's endpoints (EndpointSlice kubernetes in namespace default), which sandboxes must not reach")
	}
	var addrs []netip.Addr
	for _, e := range s.Endpoints {
		for _, a := range e.Addresses {
			if ip, err := netip.ParseAddr(a); err == nil {
				addrs = append(addrs, ip)
			}
		}
	}
	return hostPrefixes(addrs), nil
}

// serviceCIDRs returns the cluster's Service ranges, from its ServiceCIDR
// objects (networking.k8s.io/v1, Kubernetes 1.33 on): the Service
// addresses kube-proxy routes from every pod. None on a cluster without
// them.
func (r *Runtime) serviceCIDRs(ctx context.Context) ([]netip.Prefix, error) {
	l, err := r.cli.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, classify(err, "cannot list the cluster's Service ranges (ServiceCIDRs), which sandboxes must not reach")
	}
	var out []netip.Prefix
	for _, s := range l.Items {
		for _, c := range s.Spec.CIDRs {
			if p, err := netip.ParsePrefix(c); err == nil {
				out = append(out, p.Masked())
			}
		}
	}
	return out, nil
}

// uncovered returns nets without those podnet.DefaultRefused or another
// of nets covers (on most clusters all of them: nodes, pods, Services and
// API server on private addresses; a host's addresses in the Service
// range, where kube-proxy's IPVS mode puts every Service's), sorted and
// without duplicates, so that a pod's spec does not grow with the
// cluster.
func uncovered(nets []netip.Prefix) []netip.Prefix {
	covers := func(d, n netip.Prefix) bool { return d.Bits() < n.Bits() && d.Contains(n.Addr()) }
	defaults := podnet.DefaultRefused()
	out := slices.DeleteFunc(slices.Clone(nets), func(n netip.Prefix) bool {
		return slices.ContainsFunc(defaults, func(d netip.Prefix) bool { return d.Bits() <= n.Bits() && d.Contains(n.Addr()) }) ||
			slices.ContainsFunc(nets, func(d netip.Prefix) bool { return covers(d, n) })
	})
	slices.SortFunc(out, func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(out)
}

// nodeNetworks are a node's addresses and pod networks.
func nodeNetworks(n *corev1.Node) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			ip = ip.Unmap()
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
		}
	}
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// apiServer returns the addresses of the API server this runtime talks
// to, as its client names it (an address, or a name resolved now).
func (r *Runtime) apiServer(ctx context.Context) []netip.Prefix {
	host := r.cfg.APIServerHost
	if host == "" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		return []netip.Prefix{netip.PrefixFrom(ip, ip.BitLen())}
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		r.log.WarnContext(ctx, "cannot resolve the API server's name to refuse it to sandboxes", "host", host, "err", err)
	}
	var out []netip.Prefix
	for _, ip := range ips {
		ip = ip.Unmap()
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return out
}

// isolate sets pod's init container to one that refuses nets beside the
// defaults. A pod that has one already (made again from a stopped
// sandbox's record, maybe by an older server) has it replaced, so it
// refuses what the cluster holds now.
func (r *Runtime) isolate(pod *corev1.Pod, nets []netip.Prefix) {
	gvisor := pod.Spec.RuntimeClassName != nil && *pod.Spec.RuntimeClassName == r.cfg.GVisorRuntimeClass
	pod.Spec.InitContainers = []corev1.Container{r.initContainer(nets, gvisor)}
}

// initContainer returns the pod's init container, refusing nets beside
// the defaults; gvisor: for a pod of the gVisor RuntimeClass.
func (r *Runtime) initContainer(nets []netip.Prefix, gvisor bool) corev1.Container {
	c := r.isolating(nets, gvisor)
	c.Name = initContainer
	c.Args = slices.Insert(c.Args, 4, "--install-agent", AgentMountPath) // after --agent-port, as ever
	c.VolumeMounts = []corev1.VolumeMount{{Name: agentVolume, MountPath: path.Dir(AgentMountPath)}}
	return c
}

// isolating returns a container of the agent's image that runs `warren
// node isolate` refusing nets beside the defaults, with what it needs and
// no more: root, CAP_NET_ADMIN (and under gVisor CAP_NET_RAW), a
// read-only root, no escalation.
func (r *Runtime) isolating(nets []netip.Prefix, gvisor bool) corev1.Container {
	no, yes := false, true
	root := int64(0)
	args := []string{"node", "isolate", "--agent-port", strconv.Itoa(sandbox.AgentPort)}
	caps := []corev1.Capability{"NET_ADMIN"}
	if gvisor {
		// gVisor's netstack takes iptables tables through a raw socket.
		args = append(args, "--backend", "iptables")
		caps = append(caps, "NET_RAW")
	}
	if len(nets) > 0 {
		s := make([]string, len(nets))
		for i, n := range nets {
			s[i] = n.String()
		}
		args = append(args, "--refuse", strings.Join(s, ","))
	}
	return corev1.Container{
		Image:           r.cfg.AgentImage,
		ImagePullPolicy: corev1.PullPolicy(r.cfg.PullPolicy),
		Command:         []string{AgentImageBinary},
		Args:            args,
		SecurityContext: &corev1.SecurityContext{
			RunAsUser:                &root,
			RunAsGroup:               &root,
			AllowPrivilegeEscalation: &no,
			ReadOnlyRootFilesystem:   &yes,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: caps},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// isolated reports whether a pod was made with the isolating init
// container: one made by a server before it (or by hand) is open, and
// never adopted. Where it stands among init containers an admission
// webhook may have added does not matter: the sandbox starts only once
// all of them succeeded.
func isolated(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == initContainer })
}
