package kubernetes

// Named neighbours on a CNI that enforces NetworkPolicy: the chart's
// policy for every sandbox pod (sandboxPolicy: only the agent's port in,
// nothing private out) refuses a pair that the pods' own rules open.
// Policies add up, so beside it each paired pod gets one of its own,
// peerPolicy, that lets in exactly the pods it is reached by and out
// exactly those it reaches, selected by their dev.warren.sandbox label
// (one live pod each). It is written whenever the pod's own rules change,
// owned by the pod (deleted with it by the garbage collector), and only
// while sandboxPolicy is there: alone, a policy that selects a pod
// refuses it everything it does not name.

import (
	"context"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warrenhq/warren/internal/sandbox"
)

// sandboxPolicy is the chart's NetworkPolicy of every sandbox pod
// (deploy/helm/warren/templates/sandbox-network-policy.yaml).
const sandboxPolicy = "warren-sandboxes"

// peerPolicyPrefix begins the name of a paired pod's own NetworkPolicy,
// followed by the pod's name.
const peerPolicyPrefix = "warren-peers-"

// setPeerPolicy makes pod p's NetworkPolicy let exactly peers through, or
// deletes it when there are none; with no sandboxPolicy it does nothing.
// A peer whose pod is not found is left out (its pair stays refused).
func (r *Runtime) setPeerPolicy(ctx context.Context, p *corev1.Pod, peers podPeers) error {
	policies := r.cli.NetworkingV1().NetworkPolicies(r.ns)
	// The chart lets the control plane read it whether it made it or not.
	if _, err := policies.Get(ctx, sandboxPolicy, metaGet); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return classify(err, "cannot read the sandboxes' NetworkPolicy, which named neighbours must pass")
	}
	name := peerPolicyPrefix + p.Name
	if peers.empty() {
		if err := policies.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return classify(err, "cannot delete the NetworkPolicy of the sandbox's neighbours")
		}
		return nil
	}
	np := r.peerPolicy(ctx, p, peers)
	_, err := policies.Create(ctx, np, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var old *networkingv1.NetworkPolicy
		if old, err = policies.Get(ctx, name, metaGet); err == nil {
			np.ResourceVersion = old.ResourceVersion
			_, err = policies.Update(ctx, np, metav1.UpdateOptions{})
		}
	}
	return classify(err, "cannot write the NetworkPolicy of the sandbox's neighbours")
}

// peerPolicy is pod p's NetworkPolicy for peers.
func (r *Runtime) peerPolicy(ctx context.Context, p *corev1.Pod, peers podPeers) *networkingv1.NetworkPolicy {
	// Not blockOwnerDeletion: where admission enforces owner references,
	// setting it takes updating the pods' finalizers, which the control
	// plane may not.
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:            peerPolicyPrefix + p.Name,
			Namespace:       r.ns,
			Labels:          map[string]string{sandbox.LabelManaged: r.cfg.Instance},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID}},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{
				sandbox.LabelManaged: r.cfg.Instance, sandbox.LabelSandbox: p.Labels[sandbox.LabelSandbox]}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	if from := r.peerSelector(ctx, peers.reachedBy); from != nil {
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: from}}}}
	}
	if to := r.peerSelector(ctx, peers.reaches); to != nil {
		np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: to}}}}
	}
	return np
}

// peerSelector selects the live sandbox pods at ips; nil when none is.
func (r *Runtime) peerSelector(ctx context.Context, ips []netip.Addr) *metav1.LabelSelector {
	var ids []string
	for _, ip := range ips {
		if p, err := r.podAt(ctx, ip); err == nil && p.Labels[sandbox.LabelSandbox] != "" {
			ids = append(ids, p.Labels[sandbox.LabelSandbox])
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	return &metav1.LabelSelector{
		MatchLabels:      map[string]string{sandbox.LabelManaged: r.cfg.Instance},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: sandbox.LabelSandbox, Operator: metav1.LabelSelectorOpIn, Values: slices.Compact(ids)}},
	}
}
