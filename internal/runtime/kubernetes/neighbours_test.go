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
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/warrenhq/warren/internal/nodeagent"
	"github.com/warrenhq/warren/internal/sandbox"
)

// podRules records what each pod's own rules were set to open, and fails
// or defers (frozen) the pods told to.
type podRules struct {
	mu     sync.Mutex
	got    map[netip.Addr]podPeers
	calls  int
	fail   map[netip.Addr]error
	frozen map[netip.Addr]bool
}

func (p *podRules) setPeers(_ context.Context, ip netip.Addr, peers podPeers) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.frozen[ip] {
		return errFrozen
	}
	if err := p.fail[ip]; err != nil {
		return err
	}
	p.got[ip] = peers
	return nil
}

// opens is, by pod address, what the pods' rules open: "reaches X,Y" or
// "by X" for the pods that open anything.
func (p *podRules) opens() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]string{}
	for ip, ps := range p.got {
		var s []string
		for _, a := range ps.reaches {
			s = append(s, "reaches "+a.String())
		}
		for _, a := range ps.reachedBy {
			s = append(s, "by "+a.String())
		}
		if len(s) > 0 {
			out[ip.String()] = strings.Join(s, ",")
		}
	}
	return out
}

func newNeighbourFirewall(t *testing.T) (*Firewall, *podRules) {
	t.Helper()
	e := newEnv(t)
	agents := &egressAgents{got: map[string][]nodeagent.EgressRules{}, fail: map[string]error{}}
	fw := newFirewall(t, e.rt, agents, FirewallConfig{})
	rules := &podRules{got: map[netip.Addr]podPeers{}, fail: map[netip.Addr]error{}, frozen: map[netip.Addr]bool{}}
	fw.peers = rules
	return fw, rules
}

func open(allowOut ...string) sandbox.Network {
	return sandbox.Network{AllowInternetAccess: true, AllowOut: allowOut}
}

// Only a same-team sandbox whose allowOut names the target's address
// opens a pair, on both pods; another team's naming it, a wider CIDR or
// an allow-all open nothing; an update or a removal closes it again.
func TestNeighboursOpenBothPods(t *testing.T) {
	fw, pods := newNeighbourFirewall(t)
	ctx := t.Context()
	apply := func(id, ip, team string, n sandbox.Network) {
		t.Helper()
		if err := fw.Apply(ctx, id, sandbox.Egress{IP: netip.MustParseAddr(ip), TeamID: team, Network: n}); err != nil {
			t.Fatalf("apply %s: %v", id, err)
		}
	}
	want := func(what string, w map[string]string) {
		t.Helper()
		if diff := cmp.Diff(w, pods.opens()); diff != "" {
			t.Errorf("%s: pods' rules (-want +got):\n%s", what, diff)
		}
	}
	apply("target", "10.2.1.5", "t", open())
	apply("other-team", "10.2.2.6", "u", open("10.2.1.5"))
	apply("wide", "10.2.2.7", "t", open("10.2.0.0/16", "0.0.0.0/0"))
	if pods.calls != 0 {
		t.Fatalf("%d pods changed, and no pair is named", pods.calls)
	}
	apply("named", "10.2.2.5", "t", open("10.2.1.5/32"))
	want("named", map[string]string{"10.2.2.5": "reaches 10.2.1.5", "10.2.1.5": "by 10.2.2.5"})
	calls := pods.calls
	apply("named", "10.2.2.5", "t", open("10.2.1.5", "example.com"))
	if pods.calls != calls {
		t.Errorf("the same pair set again changed pods (%d calls, had %d)", pods.calls, calls)
	}
	apply("named", "10.2.2.5", "t", open())
	want("unnamed by an update", map[string]string{})

	apply("named", "10.2.2.5", "t", open("10.2.1.5"))
	if err := fw.Remove(ctx, "target"); err != nil {
		t.Fatal(err)
	}
	delete(pods.got, netip.MustParseAddr("10.2.1.5")) // its pod is gone
	want("the target went", map[string]string{})
	// A new pod at the target's old address, of another team, is no peer.
	apply("newcomer", "10.2.1.5", "v", open())
	want("another team at the old address", map[string]string{})
}

// A failure to change the applied sandbox's own pod fails its Apply; a
// neighbour's pod that fails, or is frozen, does not, and is tried again
// at Restore (and a frozen one once it thaws).
func TestNeighboursFailClosedAndRetry(t *testing.T) {
	fw, pods := newNeighbourFirewall(t)
	ctx := t.Context()
	target, named := netip.MustParseAddr("10.2.1.5"), netip.MustParseAddr("10.2.2.5")
	if err := fw.Apply(ctx, "target", sandbox.Egress{IP: target, TeamID: "t", Network: open()}); err != nil {
		t.Fatal(err)
	}
	pods.fail[named] = sandbox.Errorf(sandbox.KindUnavailable, "no ephemeral container")
	pods.fail[target] = errors.New("the target's pod is slow")
	if err := fw.Apply(ctx, "named", sandbox.Egress{IP: named, TeamID: "t", Network: open(target.String())}); sandbox.KindOf(err) != sandbox.KindUnavailable {
		t.Fatalf("apply whose own pod fails: %v", err)
	}
	delete(pods.fail, named)
	if err := fw.Apply(ctx, "named", sandbox.Egress{IP: named, TeamID: "t", Network: open(target.String())}); err != nil {
		t.Fatalf("apply whose neighbour's pod fails: %v", err)
	}
	if got := pods.opens(); got["10.2.1.5"] != "" || got["10.2.2.5"] != "reaches 10.2.1.5" {
		t.Fatalf("pods' rules: %v", got)
	}
	delete(pods.fail, target)
	pods.frozen[target] = true
	if err := fw.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if pods.opens()["10.2.1.5"] != "" {
		t.Fatal("a frozen pod's rules changed")
	}
	delete(pods.frozen, target)
	(*fw.rt.afterThaw.Load())(ctx)
	if got := pods.opens()["10.2.1.5"]; got != "by 10.2.2.5" {
		t.Fatalf("after the thaw the target's rules open %q", got)
	}
}

// A neighbour's pod that went while its rules changed (deleted at the
// same time as the sandbox whose deletion closes it) is done with, not a
// failure: closing the neighbours of a pod being deleted succeeds.
func TestNeighbourThatWentIsNoFailure(t *testing.T) {
	fw, pods := newNeighbourFirewall(t)
	ctx := t.Context()
	target, named := netip.MustParseAddr("10.2.1.5"), netip.MustParseAddr("10.2.2.5")
	closeNamed := func() error {
		t.Helper()
		if err := fw.Apply(ctx, "named", sandbox.Egress{IP: named, TeamID: "t", Network: open(target.String())}); err != nil {
			t.Fatal(err)
		}
		fw.mu.Lock()
		delete(fw.all, "named") // as closeTo does
		fw.mu.Unlock()
		return fw.openPeers(ctx, netip.Addr{}, false)
	}
	if err := fw.Apply(ctx, "target", sandbox.Egress{IP: target, TeamID: "t", Network: open()}); err != nil {
		t.Fatal(err)
	}
	pods.fail[target] = sandbox.Errorf(sandbox.KindNotFound, "the sandbox's pod went while its rules changed")
	if err := closeNamed(); err != nil {
		t.Fatalf("a neighbour that went failed the change: %v", err)
	}
	pods.fail[target] = sandbox.Errorf(sandbox.KindUnavailable, "the API server is away")
	if err := closeNamed(); sandbox.KindOf(err) != sandbox.KindUnavailable {
		t.Fatalf("a neighbour that could not be changed: %v", err)
	}
}

// The Runtime changes a running pod's rules with an ephemeral container of
// the agent's image, with the isolation's arguments and the peers, and
// waits for it to succeed; one that fails is an error naming why.
func TestSetPeersRunsAnEphemeralContainer(t *testing.T) {
	e := newEnv(t)
	e.sandboxPod(t, "warren-a", "10.2.1.5", "node-a")
	ctx := t.Context()
	ip := netip.MustParseAddr("10.2.1.5")
	peers := podPeers{reaches: []netip.Addr{netip.MustParseAddr("10.2.2.5")}, reachedBy: []netip.Addr{netip.MustParseAddr("10.2.2.6")}}
	kubelet := func(exit int32) {
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			for ctx.Err() == nil {
				p, err := e.cli.CoreV1().Pods(DefaultNamespace).Get(ctx, "warren-a", metav1.GetOptions{})
				if err == nil && len(p.Spec.EphemeralContainers) > len(p.Status.EphemeralContainerStatuses) {
					c := p.Spec.EphemeralContainers[len(p.Spec.EphemeralContainers)-1]
					p.Status.EphemeralContainerStatuses = append(p.Status.EphemeralContainerStatuses, corev1.ContainerStatus{Name: c.Name,
						State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: "no raw socket"}}})
					if _, err := e.cli.CoreV1().Pods(DefaultNamespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
						t.Errorf("kubelet: %v", err)
					}
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	kubelet(0)
	if err := e.rt.setPeers(ctx, ip, peers); err != nil {
		t.Fatal(err)
	}
	p, err := e.cli.CoreV1().Pods(DefaultNamespace).Get(ctx, "warren-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.EphemeralContainers) != 1 {
		t.Fatalf("ephemeral containers: %+v", p.Spec.EphemeralContainers)
	}
	c := p.Spec.EphemeralContainers[0]
	if c.Name != "warren-net-1" || c.Command[0] != AgentImageBinary || !slices.Contains(c.Args, "--reaches") ||
		!slices.Contains(c.Args, "10.2.2.5") || !slices.Contains(c.Args, "10.2.2.6") || slices.Contains(c.Args, "--install-agent") {
		t.Errorf("the ephemeral container runs %s %v", c.Name, c.Args)
	}
	if caps := c.SecurityContext.Capabilities; !slices.Equal(caps.Add, []corev1.Capability{"NET_ADMIN"}) || !slices.Equal(caps.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("capabilities: %+v", caps)
	}

	kubelet(1)
	if err := e.rt.setPeers(ctx, ip, podPeers{}); err == nil || !strings.Contains(err.Error(), "no raw socket") {
		t.Errorf("a failed ephemeral container: %v", err)
	}
	if p, _ := e.cli.CoreV1().Pods(DefaultNamespace).Get(ctx, "warren-a", metav1.GetOptions{}); p.Spec.EphemeralContainers[1].Name != "warren-net-2" {
		t.Errorf("the second is %q", p.Spec.EphemeralContainers[1].Name)
	}
}

// A pod never given neighbours needs no container to open none.
func TestSetNoPeersOnAnUntouchedPod(t *testing.T) {
	e := newEnv(t)
	e.sandboxPod(t, "warren-a", "10.2.1.5", "node-a")
	if err := e.rt.setPeers(t.Context(), netip.MustParseAddr("10.2.1.5"), podPeers{}); err != nil {
		t.Fatal(err)
	}
	if p, _ := e.cli.CoreV1().Pods(DefaultNamespace).Get(t.Context(), "warren-a", metav1.GetOptions{}); len(p.Spec.EphemeralContainers) != 0 {
		t.Errorf("ephemeral containers: %+v", p.Spec.EphemeralContainers)
	}
}

// A pod's spec keeps every rule-changing container, so past
// maxNetContainers a change that opens a peer is refused (the pair stays
// refused), while one that only closes still runs: a pair must close
// when its peer goes.
func TestNetContainersAreCapped(t *testing.T) {
	e := newEnv(t)
	e.sandboxPod(t, "warren-a", "10.2.1.5", "node-a")
	ctx := t.Context()
	p, err := e.cli.CoreV1().Pods(DefaultNamespace).Get(ctx, "warren-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxNetContainers {
		c := corev1.EphemeralContainer{}
		c.Name = fmt.Sprintf("%s%d", netContainerPrefix, i+1)
		c.Args = []string{"node", "isolate", "--reaches", "10.2.2.5,10.2.2.6"}
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, c)
		p.Status.EphemeralContainerStatuses = append(p.Status.EphemeralContainerStatuses, corev1.ContainerStatus{Name: c.Name,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}})
	}
	if _, err := e.cli.CoreV1().Pods(DefaultNamespace).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) { // the informer's copy
		if p, err := e.rt.pods.Get("warren-a"); err == nil && len(p.Spec.EphemeralContainers) == maxNetContainers {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("the informer never saw the pod's containers")
		}
	}
	ip, b, c := netip.MustParseAddr("10.2.1.5"), netip.MustParseAddr("10.2.2.5"), netip.MustParseAddr("10.2.2.7")
	err = e.rt.setPeers(ctx, ip, podPeers{reaches: []netip.Addr{b, c}})
	if sandbox.KindOf(err) != sandbox.KindConflict || !strings.Contains(err.Error(), "new sandbox") {
		t.Errorf("a change opening a peer past the cap: %v", err)
	}
	go func() { // the kubelet runs the closing change
		for ctx.Err() == nil {
			p, err := e.cli.CoreV1().Pods(DefaultNamespace).Get(ctx, "warren-a", metav1.GetOptions{})
			if err == nil && len(p.Spec.EphemeralContainers) > maxNetContainers {
				p.Status.EphemeralContainerStatuses = append(p.Status.EphemeralContainerStatuses, corev1.ContainerStatus{Name: p.Spec.EphemeralContainers[maxNetContainers].Name,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}})
				e.cli.CoreV1().Pods(DefaultNamespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if err := e.rt.setPeers(ctx, ip, podPeers{reaches: []netip.Addr{b}}); err != nil {
		t.Errorf("a change that only closes, past the cap: %v", err)
	}
}

// A pod's neighbours are closed to its address before it is deleted:
// once deleted, the cluster may give the address to any other pod.
func TestNeighboursCloseBeforeTheDelete(t *testing.T) {
	fw, pods := newNeighbourFirewall(t)
	e := &env{rt: fw.rt, cli: fw.rt.cli.(*fake.Clientset)}
	e.sandboxPod(t, "warren-a", "10.2.1.5", "node-a")
	e.sandboxPod(t, "warren-b", "10.2.2.5", "node-a")
	ctx := t.Context()
	for id, eg := range map[string]sandbox.Egress{
		"target": {IP: netip.MustParseAddr("10.2.1.5"), TeamID: "t", Network: open()},
		"named":  {IP: netip.MustParseAddr("10.2.2.5"), TeamID: "t", Network: open("10.2.1.5")},
	} {
		if err := fw.Apply(ctx, id, eg); err != nil {
			t.Fatal(err)
		}
	}
	var atDelete map[string]string
	e.cli.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		atDelete = pods.opens()
		return false, nil, nil
	})
	if err := fw.rt.Remove(ctx, "warren-a"); err != nil {
		t.Fatal(err)
	}
	// The deleted pod's own rules need no change: it is going.
	if diff := cmp.Diff(map[string]string{"10.2.1.5": "by 10.2.2.5"}, atDelete); diff != "" {
		t.Errorf("pods' rules when the pod was deleted (-want +got):\n%s", diff)
	}
}
