package kubernetes

import (
	"context"
	"net"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// clusterNetworks caches what every sandbox pod is refused beside
// podnet.DefaultRefused: the nodes' addresses (their kubelets, node
// agents, anything they serve) and pod networks, and the API server's
// address, which on a cluster of public addresses the defaults miss.
type clusterNetworks struct {
	mu   sync.Mutex
	nets []netip.Prefix
	at   time.Time // of the last listing; zero: none yet
}

// refused returns the cluster's networks to refuse, listed again when
// older than clusterNetworksTTL. A failed listing reuses the last one; with
// none, the pod is not made: a sandbox on a cluster of public addresses
// would otherwise reach its nodes.
func (r *Runtime) refused(ctx context.Context) ([]netip.Prefix, error) {
	c := &r.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < clusterNetworksTTL {
		return c.nets, nil
	}
	nodes, err := r.cli.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		if !c.at.IsZero() {
			r.log.WarnContext(ctx, "cannot list the nodes, isolating sandboxes from those listed before", "err", err)
			return c.nets, nil
		}
		return nil, classify(err, "cannot list the cluster's nodes, which sandboxes must not reach")
	}
	nets := slices.Clone(r.cfg.Refuse)
	for _, n := range nodes.Items {
		nets = append(nets, nodeNetworks(&n)...)
	}
	nets = append(nets, r.apiServer(ctx)...)
	c.nets, c.at = uncovered(nets), time.Now()
	return c.nets, nil
}

// uncovered returns nets without those podnet.DefaultRefused covers (on
// most clusters all of them: nodes, pods and API server on private
// addresses), sorted and without duplicates, so that a pod's spec does not
// grow with the cluster.
func uncovered(nets []netip.Prefix) []netip.Prefix {
	defaults := podnet.DefaultRefused()
	nets = slices.DeleteFunc(nets, func(n netip.Prefix) bool {
		return slices.ContainsFunc(defaults, func(d netip.Prefix) bool { return d.Bits() <= n.Bits() && d.Contains(n.Addr()) })
	})
	slices.SortFunc(nets, func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(nets)
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
