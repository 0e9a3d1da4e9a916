// Package leader elects, among the replicas of one control plane in a
// Kubernetes cluster, the one that runs what must run once, on a
// coordination.k8s.io Lease (client-go's leaderelection), and tells the
// others where it is: the address of its pod.
//
// It owns the election and the leader's address, not what the leader
// does (internal/server starts and stops that) nor how followers reach it.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/warrenhq/warren/internal/logkey"
)

// The Lease's timing. A holder that stops renewing without handing the
// Lease on (its pod killed while a change still ran on it, ~2 s after the
// signal of a forced deletion; its node gone) is replaced within
// LeaseDuration and two tries of a follower's (one to see its last
// renewal, one once it ran out; RetryPeriod jittered up to 2.2 times):
// ~9.2 s, 11.2 s from a forced deletion, within the 15 s a failover may
// take (10 s and 1 s here took up to ~15.7 s). One that hands it on is
// replaced within a try, 0.5-1.1 s. One that cannot renew stops leading
// RetryPeriod and RenewDeadline after its last renewal at most, 1.5 s
// before the Lease can pass; the Lease's calls took at most 0.66 s (p99
// 0.24 s) in 20 minutes on the test cluster's shared machine at load
// 9-33 (docs/kubernetes.md). The leader updates the Lease twice a second,
// each follower reads it about once a second: ~4.3 calls a second to the
// API server for three replicas.
const (
	LeaseDuration = 7 * time.Second
	RenewDeadline = 5 * time.Second
	RetryPeriod   = 500 * time.Millisecond
)

// DefaultLease is the Lease's name.
const DefaultLease = "warren"

// Config is what an Elector campaigns with.
type Config struct {
	Client    k8s.Interface // required
	Namespace string        // of the Lease and the replicas' pods; required
	Lease     string        // the Lease's name; "" = DefaultLease
	// Identity is this replica's name in the Lease: its pod's name when
	// it runs in a pod (the followers find the leader's address there),
	// else anything unique (hostname and process ID). Required.
	Identity string
	// InPod says Identity is this replica's pod's name (Forced looks it
	// up). Default false: not in a pod.
	InPod bool
	// Port is where every replica serves (the followers forward to the
	// leader's pod IP on it). Required.
	Port   int
	Logger *slog.Logger // nil = discard
}

// Elector campaigns for the Lease and knows who holds it.
type Elector struct {
	cfg Config
	log *slog.Logger
	le  *leaderelection.LeaderElector

	mu      sync.Mutex // guards changed and pod
	changed chan struct{}
	// pod caches the address of the holder's pod, by its identity.
	pod struct{ identity, addr string }

	lead func(ctx context.Context) // set by Run
	lost func()

	// forced is set once the watch of this replica's pod saw it deleted
	// with no grace to speak of (watchOwnPod).
	forced atomic.Bool
}

// New returns an Elector; it campaigns once Run.
func New(cfg Config) (*Elector, error) {
	if cfg.Client == nil || cfg.Namespace == "" || cfg.Identity == "" || cfg.Port == 0 {
		return nil, errors.New("leader: Config.Client, Namespace, Identity and Port are required")
	}
	if cfg.Lease == "" {
		cfg.Lease = DefaultLease
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Elector{cfg: cfg, log: logkey.For(cfg.Logger, "leader"), changed: make(chan struct{})}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Lease},
		Client:     cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: cfg.Lease,
		LeaseDuration: LeaseDuration, RenewDeadline: RenewDeadline, RetryPeriod: RetryPeriod,
		// A replica stopped cleanly hands the Lease on at once.
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { e.lead(ctx) },
			OnStoppedLeading: func() { e.lost() },
			OnNewLeader:      e.newLeader,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	e.le = le
	return e, nil
}

// Run campaigns until ctx ends. Once this replica holds the Lease, lead
// runs (in a goroutine of its own) with a context that ends when it stops
// holding it; lost is then called, and Run returns: a replica that lost
// the Lease must stop its leader's work at once, and the simplest sure way
// is to end the process, which comes back as a follower. When ctx ends
// while leading, the Lease is released after lead's context ends, and
// lost is called too.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context), lost func()) {
	e.lead, e.lost = lead, lost
	if e.cfg.InPod {
		go e.watchOwnPod(ctx)
	}
	e.log.Info("campaigning for the Lease", "lease", e.cfg.Namespace+"/"+e.cfg.Lease, "identity", e.cfg.Identity)
	e.le.Run(ctx)
}

// Identity is this replica's name in the Lease.
func (e *Elector) Identity() string { return e.cfg.Identity }

// Leading reports whether this replica holds the Lease.
func (e *Elector) Leading() bool { return e.le.IsLeader() }

// Changed is closed when the Lease's holder changes next.
func (e *Elector) Changed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

func (e *Elector) newLeader(identity string) {
	e.log.Info("the Lease has a new holder", "holder", identity, "self", identity == e.cfg.Identity)
	e.mu.Lock()
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
}

// ErrNoLeader is Leader's error while no replica is known to lead, or the
// one last seen has no pod to reach.
var ErrNoLeader = errors.New("no control-plane replica leads")

// Leader returns the address (host:port) of the leading replica, and
// whether it is this one. The address is the leader's pod IP: a holder
// whose pod is gone or going, or is no pod, is ErrNoLeader.
func (e *Elector) Leader(ctx context.Context) (addr string, self bool, err error) {
	holder := e.le.GetLeader()
	if holder == "" {
		// None seen yet, or this replica released the Lease and no longer
		// campaigns (it is stopping, and still forwards what it is sent):
		// the Lease itself says who holds it.
		if holder, err = e.holder(ctx); err != nil {
			return "", false, err
		}
	}
	switch {
	case holder == "":
		return "", false, ErrNoLeader
	case holder == e.cfg.Identity:
		return "", true, nil
	}
	e.mu.Lock()
	cached := e.pod
	e.mu.Unlock()
	if cached.identity == holder {
		return cached.addr, false, nil
	}
	p, err := e.cfg.Client.CoreV1().Pods(e.cfg.Namespace).Get(ctx, holder, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && (p.DeletionTimestamp != nil || p.Status.PodIP == "")) {
		return "", false, ErrNoLeader
	}
	if err != nil {
		return "", false, fmt.Errorf("the leader's pod: %w", err)
	}
	addr = net.JoinHostPort(p.Status.PodIP, strconv.Itoa(e.cfg.Port))
	e.mu.Lock()
	e.pod.identity, e.pod.addr = holder, addr
	e.mu.Unlock()
	return addr, false, nil
}

// holder is the Lease's holder as the API server has it, "" when it has
// been released or has run out.
func (e *Elector) holder(ctx context.Context) (string, error) {
	l, err := e.cfg.Client.CoordinationV1().Leases(e.cfg.Namespace).Get(ctx, e.cfg.Lease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("the Lease: %w", err)
	}
	sp := l.Spec
	if sp.HolderIdentity == nil || sp.RenewTime == nil || sp.LeaseDurationSeconds == nil ||
		time.Since(sp.RenewTime.Time) > time.Duration(*sp.LeaseDurationSeconds)*time.Second {
		return "", nil
	}
	return *sp.HolderIdentity, nil
}

// Unreachable forgets the leader's address once it could not be reached,
// so that the next Leader looks again.
func (e *Elector) Unreachable(addr string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pod.addr == addr {
		e.pod = struct{ identity, addr string }{}
	}
}

// forcedGrace is the longest grace period, in seconds, of a deletion
// whose pod the kubelet kills ~2 s after its signal: the kubelet's floor.
const forcedGrace = 2

// forcedAttempt bounds one question of Forced to the API server, which
// asks again every forcedAgain until its context ends.
const (
	forcedAttempt = 400 * time.Millisecond
	forcedAgain   = 100 * time.Millisecond
)

// Forced reports whether this replica's pod was deleted with no grace to
// speak of: gone from the API server already, as a deletion with
// --grace-period=0 --force leaves it (a pod deleted with a grace period
// stays until its containers have stopped), or deleted with forcedGrace
// seconds or less. Its process is then killed ~2 s after its signal, too
// soon to finish most changes it would start. A question the API server
// does not answer in forcedAttempt (a busy one) is asked again until ctx
// ends, unless the watch of the pod (watchOwnPod) has seen the deletion
// meanwhile, or before: it is usually the first to know. False when not in
// a pod, or when the API server cannot say.
func (e *Elector) Forced(ctx context.Context) bool {
	if !e.cfg.InPod {
		return false
	}
	for {
		if e.forced.Load() {
			return true
		}
		attempt, cancel := context.WithTimeout(ctx, forcedAttempt)
		p, err := e.cfg.Client.CoreV1().Pods(e.cfg.Namespace).Get(attempt, e.cfg.Identity, metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			return true
		case err == nil:
			return withoutGrace(p)
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(forcedAgain):
		}
	}
}

// watchOwnPod follows this replica's pod from the API server until ctx
// ends, and sets forced when it is deleted with forcedGrace seconds or
// less, or gone: the deletion reaches the watch as the kubelet learns of
// it, before its signal, so Forced need not ask then, when a busy API
// server may answer too late (a follower of the failover e2e, asked at
// its signal, never knew it was force-deleted in the 2 s before its
// kill). A watch that ends is started again a second later.
func (e *Elector) watchOwnPod(ctx context.Context) {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", e.cfg.Identity).String()}
	for {
		w, err := e.cfg.Client.CoreV1().Pods(e.cfg.Namespace).Watch(ctx, opts)
		if err == nil {
			for ev := range w.ResultChan() {
				if forcedBy(ev, e.cfg.Identity) {
					e.forced.Store(true)
				}
			}
			w.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// forcedBy reports whether ev says the pod named identity is gone or
// was deleted withoutGrace.
func forcedBy(ev watch.Event, identity string) bool {
	p, ok := ev.Object.(*corev1.Pod)
	return ok && p.Name == identity && (ev.Type == watch.Deleted || withoutGrace(p))
}

// withoutGrace reports whether p was deleted with forcedGrace seconds or
// less.
func withoutGrace(p *corev1.Pod) bool {
	return p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds <= forcedGrace
}
