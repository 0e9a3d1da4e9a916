package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"

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
func replicaElection(cfg serveConfig, cli k8s.Interface, secret string, log *slog.Logger) (*leader.Elector, error) {
	if kind, err := storeFor(cfg.Store); err != nil || !kind.shared {
		return nil, err
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
	return leader.New(leader.Config{Client: cli, Namespace: cfg.Kube.Namespace, Identity: identity, Port: p, Logger: log})
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
