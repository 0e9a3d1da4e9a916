package kubernetes

// Named neighbours: a sandbox reaches another of its team when its
// allowOut names that sandbox's address, as on the Docker engine. Both
// pods' own rules refuse the pod networks (podnet), so both change while
// they run: the pod of the one that names gets the other in its Reaches,
// the named one gets it in its ReachedBy. Only a container in the pod with
// CAP_NET_ADMIN can change them (under gVisor they live in the pod's
// netstack), and the sandbox container must never hold it, so each change
// is an ephemeral container of the agent's image running `warren node
// isolate` once with the pod's whole rules, in a PID namespace of its own
// (the sandbox's root, which may ptrace, never sees it), as the init
// container did.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/warrenhq/warren/internal/sandbox"
)

// netContainerPrefix begins the names of the ephemeral containers that
// change a running pod's rules: warren-net-1, warren-net-2, ...
const netContainerPrefix = "warren-net-"

// maxNetContainers is how many rule-changing ephemeral containers one
// pod takes. The API deletes none: each stays in the pod's spec and
// status, ~1.5 KiB with its managed fields (measured: a pod of 64 is 98
// KB), and etcd refuses an object past 1.5 MiB. Past the cap a change
// that opens a peer fails (409) and the pair stays refused; one that only
// closes still runs, since a pair must close when its peer goes (at most
// one such change per peer the capped ones opened).
const maxNetContainers = 100

// peersTimeout bounds the wait for a pod's ephemeral container to apply
// its rules (a container start: ~2 s on the loaded test cluster).
const peersTimeout = 60 * time.Second

// podPeers is what a pod's rules open beside the agent's port: the
// same-team sandboxes it reaches and those that reach it, sorted.
type podPeers struct {
	reaches, reachedBy []netip.Addr
}

func (p podPeers) equal(o podPeers) bool {
	return slices.Equal(p.reaches, o.reaches) && slices.Equal(p.reachedBy, o.reachedBy)
}

func (p podPeers) empty() bool { return len(p.reaches) == 0 && len(p.reachedBy) == 0 }

// neighbourPlan returns, by pod address, the peers of every sandbox in
// all that has any: the pairs of sandbox.Neighbours, the Docker
// firewall's too.
func neighbourPlan(all map[string]sandbox.Egress) map[netip.Addr]podPeers {
	plan := map[netip.Addr]podPeers{}
	for _, n := range sandbox.Neighbours(all) {
		from := plan[n.FromIP]
		from.reaches = append(from.reaches, n.ToIP)
		plan[n.FromIP] = from
		at := plan[n.ToIP]
		at.reachedBy = append(at.reachedBy, n.FromIP)
		plan[n.ToIP] = at
	}
	for ip, p := range plan {
		slices.SortFunc(p.reaches, netip.Addr.Compare)
		slices.SortFunc(p.reachedBy, netip.Addr.Compare)
		plan[ip] = podPeers{reaches: slices.Compact(p.reaches), reachedBy: slices.Compact(p.reachedBy)}
	}
	return plan
}

// errFrozen says a pod is frozen: an ephemeral container would start in
// its frozen cgroup and never run, so its rules change once it thaws.
var errFrozen = errors.New("the sandbox's pod is frozen")

// setPeers replaces the rules of this server's live pod at ip with the
// isolation it was made with and peers, and returns once they are in
// place: an ephemeral container runs `warren node isolate` in it, and its
// NetworkPolicy lets exactly peers through (policy.go). A failure leaves the pod's last rules as they were (fail closed: a pair
// not yet opened stays refused).
func (r *Runtime) setPeers(ctx context.Context, ip netip.Addr, peers podPeers) error {
	ctx, cancel := context.WithTimeout(ctx, peersTimeout)
	defer cancel()
	nets, err := r.refused(ctx)
	if err != nil {
		return err
	}
	var name string
	var pod *corev1.Pod
	for try := 0; ; try++ {
		p, err := r.podAt(ctx, ip)
		if err != nil {
			return err
		}
		if peers.empty() && !slices.ContainsFunc(p.Spec.EphemeralContainers, func(c corev1.EphemeralContainer) bool {
			return strings.HasPrefix(c.Name, netContainerPrefix)
		}) {
			return nil // its init container's rules open none
		}
		if p.Annotations[annotationFrozen] == "true" {
			return errFrozen
		}
		if opens(lastPeers(p), peers) && netContainers(p) >= maxNetContainers {
			return sandbox.Errorf(sandbox.KindConflict, "the sandbox's pod changed its rules for neighbours %d times, the most one pod takes (each change stays in its spec): name this neighbour from a new sandbox", maxNetContainers)
		}
		pod = p
		name = nextNetContainer(p)
		gvisor := p.Spec.RuntimeClassName != nil && *p.Spec.RuntimeClassName == r.cfg.GVisorRuntimeClass
		c := r.isolating(nets, gvisor)
		c.Name = name
		c.Args = append(c.Args, peerArgs(peers)...)
		p = p.DeepCopy()
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon(c)})
		_, err = r.cli.CoreV1().Pods(r.ns).UpdateEphemeralContainers(ctx, p.Name, p, metav1.UpdateOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || try == 2 {
			return classify(err, "cannot change the rules of the sandbox's pod for its neighbours")
		}
	}
	if err := r.setPeerPolicy(ctx, pod, peers); err != nil {
		return err
	}
	return r.waitNetContainer(ctx, pod.Name, name)
}

// peerArgs are the arguments of `warren node isolate` that open peers.
func peerArgs(peers podPeers) []string {
	join := func(as []netip.Addr) string {
		s := make([]string, len(as))
		for i, a := range as {
			s[i] = a.String()
		}
		return strings.Join(s, ",")
	}
	var args []string
	if len(peers.reaches) > 0 {
		args = append(args, "--reaches", join(peers.reaches))
	}
	if len(peers.reachedBy) > 0 {
		args = append(args, "--reached-by", join(peers.reachedBy))
	}
	return args
}

// netContainers counts a pod's rule-changing ephemeral containers.
func netContainers(p *corev1.Pod) int {
	n := 0
	for _, c := range p.Spec.EphemeralContainers {
		if strings.HasPrefix(c.Name, netContainerPrefix) {
			n++
		}
	}
	return n
}

// lastPeers returns what the pod's last rule-changing ephemeral container
// opened (none: the init container's, which open nothing).
func lastPeers(p *corev1.Pod) podPeers {
	var out podPeers
	for _, c := range p.Spec.EphemeralContainers {
		if !strings.HasPrefix(c.Name, netContainerPrefix) {
			continue
		}
		out = podPeers{}
		for i := 0; i+1 < len(c.Args); i++ {
			switch c.Args[i] {
			case "--reaches":
				out.reaches = peerAddrs(c.Args[i+1])
			case "--reached-by":
				out.reachedBy = peerAddrs(c.Args[i+1])
			}
		}
	}
	return out
}

// peerAddrs reads peerArgs' comma-separated addresses.
func peerAddrs(s string) []netip.Addr {
	var out []netip.Addr
	for _, f := range strings.Split(s, ",") {
		if a, err := netip.ParseAddr(f); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// opens reports whether going from have to want opens a peer have does
// not.
func opens(have, want podPeers) bool {
	missing := func(want, have []netip.Addr) bool {
		return slices.ContainsFunc(want, func(a netip.Addr) bool { return !slices.Contains(have, a) })
	}
	return missing(want.reaches, have.reaches) || missing(want.reachedBy, have.reachedBy)
}

// nextNetContainer names the next of a pod's rule-changing ephemeral
// containers.
func nextNetContainer(p *corev1.Pod) string {
	n := 0
	for _, c := range p.Spec.EphemeralContainers {
		var i int
		if _, err := fmt.Sscanf(strings.TrimPrefix(c.Name, netContainerPrefix), "%d", &i); err == nil && strings.HasPrefix(c.Name, netContainerPrefix) {
			n = max(n, i)
		}
	}
	return fmt.Sprintf("%s%d", netContainerPrefix, n+1)
}

// waitNetContainer waits until the pod's ephemeral container name ended,
// and fails unless it succeeded.
func (r *Runtime) waitNetContainer(ctx context.Context, pod, name string) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := r.pods.Get(pod)
		if apierrors.IsNotFound(err) {
			p, err = r.cli.CoreV1().Pods(r.ns).Get(ctx, pod, metaGet)
		}
		if err != nil {
			return classify(err, "the sandbox's pod went while its rules changed")
		}
		for _, s := range p.Status.EphemeralContainerStatuses {
			if t := s.State.Terminated; s.Name == name && t != nil {
				if t.ExitCode != 0 {
					return sandbox.Errorf(sandbox.KindInternal, "the rules of the sandbox's pod for its neighbours did not apply (exit %d): %s",
						t.ExitCode, cmp.Or(strings.TrimSpace(t.Message), t.Reason))
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return sandbox.Wrap(sandbox.KindUnavailable, ctx.Err(), fmt.Sprintf("the rules of the sandbox's pod for its neighbours did not apply within %v", peersTimeout))
		case <-tick.C:
		}
	}
}

// podAt returns this server's live sandbox pod at ip.
func (r *Runtime) podAt(ctx context.Context, ip netip.Addr) (*corev1.Pod, error) {
	live := func(p *corev1.Pod) bool {
		return p.Status.PodIP == ip.String() && p.Spec.NodeName != "" && p.DeletionTimestamp == nil &&
			p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded
	}
	sel, err := labels.Parse(r.selector())
	if err != nil {
		return nil, err
	}
	if pods, err := r.pods.List(sel); err == nil {
		for _, p := range pods {
			if live(p) {
				return p, nil
			}
		}
	}
	// The informer may not have seen the pod's address yet.
	list, err := r.cli.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{LabelSelector: r.selector(), FieldSelector: "status.podIP=" + ip.String()})
	if err != nil {
		return nil, classify(err, "cannot find the sandbox's pod")
	}
	for i := range list.Items {
		if live(&list.Items[i]) {
			return &list.Items[i], nil
		}
	}
	return nil, sandbox.Errorf(sandbox.KindNotFound, "no live sandbox pod has the address %s", ip)
}

// closeTo closes the neighbours' pods to ip, whose pod is being deleted,
// and returns once they are: the cluster may give the address to another
// pod, of any workload, as soon as it is deleted. The sandbox there is
// forgotten (Remove follows; a stopped one's new pod is applied anew);
// a peer whose change fails keeps the pair open until it is tried again
// at the next reconcile, as in Remove.
func (f *Firewall) closeTo(ctx context.Context, ip netip.Addr) {
	f.mu.Lock()
	held := false
	for id, e := range f.all {
		if e.IP == ip {
			delete(f.all, id)
			held = true
		}
	}
	delete(f.opened, ip)
	f.mu.Unlock()
	if !held {
		return
	}
	if err := f.openPeers(ctx, netip.Addr{}, false); err != nil {
		f.log.ErrorContext(ctx, "cannot close the neighbours of a sandbox pod being deleted: tried again at the next reconcile", "ip", ip, "err", err)
	}
}

// openPeers changes the rules of the sandbox pods whose neighbours are
// not what their sandbox's and the others' settings say, in parallel, and
// returns once each is done: with all, every such pod; else own's (the
// sandbox being applied; the zero Addr: none) and those whose pairs
// changed since the last call, leaving earlier failures to Restore. It
// returns the error of own's pod and logs the others', except with no
// own, when it returns them all. A frozen pod is left for a later call.
func (f *Firewall) openPeers(ctx context.Context, own netip.Addr, all bool) error {
	f.mu.Lock()
	plan := neighbourPlan(f.all)
	var change []netip.Addr
	for _, e := range f.all {
		have, known := f.opened[e.IP]
		if (!known || !have.equal(plan[e.IP])) && (all || e.IP == own || !f.planned[e.IP].equal(plan[e.IP])) {
			change = append(change, e.IP)
		}
	}
	f.planned = plan
	f.mu.Unlock()
	slices.SortFunc(change, netip.Addr.Compare)
	errs := make([]error, len(change))
	var wg sync.WaitGroup
	for i, ip := range change {
		wg.Go(func() { errs[i] = f.setPeers(ctx, ip) })
	}
	wg.Wait()
	var out []error
	for i, err := range errs {
		switch {
		case err == nil:
		case !own.IsValid() || change[i] == own:
			out = append(out, err)
		default:
			f.log.ErrorContext(ctx, "cannot change a sandbox pod's rules for its neighbours: tried again at the next reconcile", "ip", change[i], "err", err)
		}
	}
	return errors.Join(out...)
}

// setPeers gives the pod at ip the neighbours the current settings give
// it, unless it has them already.
func (f *Firewall) setPeers(ctx context.Context, ip netip.Addr) error {
	mu, _ := f.podLocks.LoadOrStore(ip, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	f.mu.Lock()
	want := neighbourPlan(f.all)[ip]
	have, known := f.opened[ip]
	live := f.holds(ip)
	f.mu.Unlock()
	if !live || known && have.equal(want) {
		return nil
	}
	err := f.peers.setPeers(ctx, ip, want)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case errors.Is(err, errFrozen):
		f.log.InfoContext(ctx, "a frozen sandbox pod's neighbours change when it runs again", "ip", ip)
		delete(f.opened, ip)
		return nil
	case sandbox.KindOf(err) == sandbox.KindNotFound:
		// The pod went (deleted while this changed it): it reaches nothing
		// any more, and its own deletion closes its peers to it.
		f.log.DebugContext(ctx, "a sandbox pod went while its neighbours changed", "ip", ip, "err", err)
		delete(f.opened, ip)
		return nil
	case err != nil:
		delete(f.opened, ip)
		return err
	}
	if f.holds(ip) {
		f.opened[ip] = want
	}
	f.log.DebugContext(ctx, "a sandbox pod's neighbours changed", "ip", ip, "reaches", want.reaches, "reachedBy", want.reachedBy)
	return nil
}

// holds reports whether a sandbox's pod is at ip. The caller holds f.mu.
func (f *Firewall) holds(ip netip.Addr) bool {
	for _, e := range f.all {
		if e.IP == ip {
			return true
		}
	}
	return false
}
