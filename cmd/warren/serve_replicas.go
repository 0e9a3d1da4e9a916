package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/warrenhq/warren/internal/leader"
)

// replicaElection returns the leader election of a control plane whose
// replicas share its store (--engine kubernetes on a PostgreSQL --store):
// a Lease named warren in the sandboxes' namespace, this replica named
// by its pod. With a store of one server's (SQLite) it returns nil: one
// replica, which leads alone, as on Docker. The replicas prove forwarded
// calls to each other with the node agents' token, a secret they all
// read already.
func replicaElection(ctx context.Context, cfg serveConfig, cli k8s.Interface, secret string, log *slog.Logger) (*leader.Elector, error) {
	kind, err := storeFor(cfg.Store)
	if err != nil {
		return nil, err
	}
	if !kind.shared {
		return nil, aloneOnStore(ctx, cfg, cli, kind)
	}
	if secret == "" {
		return nil, errors.New("replicas on a shared store forward calls to their leader with the node agents' token: give --node-token-secret")
	}
	_, port, err := net.SplitHostPort(cfg.Addr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p == 0 {
		return nil, usageError{fmt.Sprintf("--addr=%q: replicas on a shared store need a fixed port, the same on every replica", cfg.Addr)}
	}
	identity := cfg.Kube.PodName
	if identity == "" {
		host, _ := os.Hostname()
		identity = fmt.Sprintf("%s_%d", host, os.Getpid())
	}
	return leader.New(leader.Config{Client: cli, Namespace: cfg.Kube.Namespace, Identity: identity, InPod: cfg.Kube.PodName != "", Port: p, Logger: log})
}

// lostLeadership ends the process when this replica stops leading: its
// timers, pools and reconcile must stop at once, and a process that
// starts again as a follower holds nothing of what it led. The sandboxes
// stay; the next leader adopts them.
func lostLeadership(log *slog.Logger) func() {
	return func() {
		log.Error("lost the leadership: stopping at once; the next start follows the new leader")
		os.Exit(1)
	}
}

// aloneOnStore refuses to serve on a store of one server's (SQLite) beside
// another replica of the control plane: one holding the Lease the
// replicas elect their leader on, or, in a pod, another live pod with this
// one's app.kubernetes.io/name. Two servers on two SQLite files would each
// take the other's sandbox pods for strays, and on one file would corrupt
// it. What cannot be read (no RBAC for it, say) is no replica.
func aloneOnStore(ctx context.Context, cfg serveConfig, cli k8s.Interface, kind storeKind) error {
	ns := cfg.Kube.Namespace
	refuse := func(other string) error {
		return fmt.Errorf("another control-plane replica runs in namespace %s (%s) and this one is on %s, which only one server may use: "+
			"give every replica a PostgreSQL --store (WARREN_STORE; docs/kubernetes.md, \"High availability\"), or run one replica", ns, other, kind.name)
	}
	l, err := cli.CoordinationV1().Leases(ns).Get(ctx, leader.DefaultLease, metav1.GetOptions{})
	if err == nil {
		sp := l.Spec
		if sp.HolderIdentity != nil && *sp.HolderIdentity != "" && *sp.HolderIdentity != cfg.Kube.PodName &&
			sp.RenewTime != nil && sp.LeaseDurationSeconds != nil &&
			time.Since(sp.RenewTime.Time) <= time.Duration(*sp.LeaseDurationSeconds)*time.Second {
			return refuse("it holds the Lease " + leader.DefaultLease + " as " + *sp.HolderIdentity)
		}
	} else if !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		return fmt.Errorf("the Lease %s/%s: %w", ns, leader.DefaultLease, err)
	}
	if cfg.Kube.PodName == "" {
		return nil
	}
	self, err := cli.CoreV1().Pods(ns).Get(ctx, cfg.Kube.PodName, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	name := self.Labels["app.kubernetes.io/name"]
	if name == "" {
		return nil
	}
	pods, err := cli.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + name})
	if err != nil {
		return nil
	}
	for _, p := range pods.Items {
		if p.Name != self.Name && p.DeletionTimestamp == nil && (p.Status.Phase == "Running" || p.Status.Phase == "Pending") {
			return refuse("pod " + p.Name)
		}
	}
	return nil
}
