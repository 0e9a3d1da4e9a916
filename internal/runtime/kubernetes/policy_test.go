package kubernetes

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warrenhq/warren/internal/sandbox"
)

// runNetContainers plays the kubelet for pod name's rule-changing
// containers until the test ends: each ends with success.
func (e *env) runNetContainers(t *testing.T, name string) {
	ctx := t.Context()
	go func() {
		for ctx.Err() == nil {
			p, err := e.cli.CoreV1().Pods(DefaultNamespace).Get(ctx, name, metav1.GetOptions{})
			if err == nil && len(p.Spec.EphemeralContainers) > len(p.Status.EphemeralContainerStatuses) {
				c := p.Spec.EphemeralContainers[len(p.Status.EphemeralContainerStatuses)]
				p.Status.EphemeralContainerStatuses = append(p.Status.EphemeralContainerStatuses, corev1.ContainerStatus{Name: c.Name,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}})
				e.cli.CoreV1().Pods(DefaultNamespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
}

// With the chart's sandbox policy there, a paired pod gets a
// NetworkPolicy of its own that lets in exactly the pods that reach it
// and out exactly those it reaches, owned by the pod; without peers it
// goes. Without the chart's policy none is written: alone it would refuse
// the pod all else.
func TestPeerPolicyLetsExactlyThePairsThrough(t *testing.T) {
	e := newEnv(t)
	e.sandboxPod(t, "warren-a", "10.2.1.5", "node-a")
	e.sandboxPod(t, "warren-b", "10.2.2.5", "node-b")
	e.sandboxPod(t, "warren-c", "10.2.2.6", "node-b")
	ctx := t.Context()
	e.runNetContainers(t, "warren-a")
	a := netip.MustParseAddr("10.2.1.5")
	peers := podPeers{reaches: []netip.Addr{netip.MustParseAddr("10.2.2.6"), netip.MustParseAddr("10.2.2.5")},
		reachedBy: []netip.Addr{netip.MustParseAddr("10.2.2.5"), netip.MustParseAddr("10.9.9.9")}} // the last: no pod
	policies := e.cli.NetworkingV1().NetworkPolicies(DefaultNamespace)
	policy := func() *networkingv1.NetworkPolicy {
		np, err := policies.Get(ctx, "warren-peers-warren-a", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			t.Fatal(err)
		}
		return np
	}

	if err := e.rt.setPeers(ctx, a, peers); err != nil {
		t.Fatal(err)
	}
	if np := policy(); np != nil {
		t.Fatalf("a NetworkPolicy without the chart's: %+v", np.Spec)
	}

	if _, err := policies.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: sandboxPolicy}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.setPeers(ctx, a, peers); err != nil {
		t.Fatal(err)
	}
	selects := func(ids ...string) []networkingv1.NetworkPolicyPeer {
		return []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{
			MatchLabels:      map[string]string{sandbox.LabelManaged: sandbox.DefaultInstance},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: sandbox.LabelSandbox, Operator: metav1.LabelSelectorOpIn, Values: ids}},
		}}}
	}
	want := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "warren-peers-warren-a", Namespace: DefaultNamespace,
			Labels:          map[string]string{sandbox.LabelManaged: sandbox.DefaultInstance},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "warren-a", UID: "uid-warren-a"}}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{sandbox.LabelManaged: sandbox.DefaultInstance, sandbox.LabelSandbox: "sbx-warren-a"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: selects("sbx-warren-b")}},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{To: selects("sbx-warren-b", "sbx-warren-c")}},
		},
	}
	var got *networkingv1.NetworkPolicy
	if np := policy(); np != nil {
		got = &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: np.Name, Namespace: np.Namespace, Labels: np.Labels,
			OwnerReferences: np.OwnerReferences}, Spec: np.Spec}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the pod's NetworkPolicy (-want +got):\n%s", diff)
	}

	// Fewer peers: the same policy, rewritten.
	if err := e.rt.setPeers(ctx, a, podPeers{reaches: []netip.Addr{netip.MustParseAddr("10.2.2.6")}}); err != nil {
		t.Fatal(err)
	}
	if got := policy(); got == nil || got.Spec.Ingress != nil || !cmp.Equal(got.Spec.Egress[0].To, selects("sbx-warren-c")) {
		t.Errorf("the policy after a change: %+v", got)
	}
	if err := e.rt.setPeers(ctx, a, podPeers{}); err != nil {
		t.Fatal(err)
	}
	if np := policy(); np != nil {
		t.Errorf("a NetworkPolicy without peers: %+v", np.Spec)
	}
}
