package main

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// A control plane on SQLite refuses to serve beside another replica: one
// holding the Lease, or another live pod of its Deployment; alone, or
// beside a pod on its way out or a Lease run out, it serves.
func TestSQLiteRefusesAnotherReplica(t *testing.T) {
	pod := func(name string, phase corev1.PodPhase, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "warren", Labels: map[string]string{"app.kubernetes.io/name": "warren"}},
			Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			p.Finalizers = []string{"test"}
		}
		return p
	}
	lease := func(holder string, renewed time.Duration) *coordinationv1.Lease {
		secs := int32(10)
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "warren", Namespace: "warren"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs,
				RenewTime: &metav1.MicroTime{Time: time.Now().Add(-renewed)}}}
	}
	self := pod("warren-a", corev1.PodRunning, false)
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		refused string
	}{
		{name: "alone", objects: []runtime.Object{self}},
		{name: "another pod", objects: []runtime.Object{self, pod("warren-b", corev1.PodPending, false)}, refused: "pod warren-b"},
		{name: "a pod going", objects: []runtime.Object{self, pod("warren-b", corev1.PodRunning, true)}},
		{name: "a pod ended", objects: []runtime.Object{self, pod("warren-b", corev1.PodFailed, false)}},
		{name: "a leader", objects: []runtime.Object{self, lease("warren-x", time.Second)}, refused: "holds the Lease warren as warren-x"},
		{name: "a Lease run out", objects: []runtime.Object{self, lease("warren-x", time.Minute)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := serveConfig{}
			cfg.Kube.Namespace, cfg.Kube.PodName = "warren", "warren-a"
			_, err := replicaElection(context.Background(), cfg, fake.NewClientset(tc.objects...), "token", nil)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused alone: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "PostgreSQL")):
				t.Fatalf("err = %v, want a refusal naming %q and PostgreSQL", err, tc.refused)
			}
		})
	}
}
