package leader

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func pod(name, ip string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "warren"}, Status: corev1.PodStatus{PodIP: ip}}
}

// elector campaigns as identity on cli until the test ends or its stop is
// called; leading is closed once it leads, lost once it stopped.
func elector(t *testing.T, cli *fake.Clientset, identity string) (e *Elector, leading, lost chan struct{}, stop func()) {
	t.Helper()
	e, err := New(Config{Client: cli, Namespace: "warren", Identity: identity, Port: 3000})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	leading, lost = make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx, func(context.Context) { close(leading) }, func() { close(lost) })
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return e, leading, lost, stop
}

func within(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
	}
}

// One replica leads and the other finds it at its pod's IP; when the
// leader stops, the Lease passes to the other.
func TestElectionAndHandOver(t *testing.T) {
	cli := fake.NewClientset(pod("a", "10.0.0.1"), pod("b", "10.0.0.2"))
	a, aLeads, aLost, stopA := elector(t, cli, "a")
	within(t, aLeads, 5*time.Second, "a leading")
	b, bLeads, _, _ := elector(t, cli, "b")
	deadline := time.Now().Add(5 * time.Second)
	for {
		addr, self, err := b.Leader(context.Background())
		if err == nil && !self && addr == "10.0.0.1:3000" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's view of the leader: %q self=%v %v; want 10.0.0.1:3000", addr, self, err)
		}
		select {
		case <-b.Changed():
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, self, _ := a.Leader(context.Background()); !self || !a.Leading() || b.Leading() {
		t.Fatal("a does not lead, or b thinks it does")
	}
	stopA() // a clean stop hands the Lease on
	within(t, aLost, time.Second, "a told it lost")
	within(t, bLeads, RetryPeriod+3*time.Second, "b leading once a stopped")
	lease, err := cli.CoordinationV1().Leases("warren").Get(context.Background(), DefaultLease, metav1.GetOptions{})
	if err != nil || *lease.Spec.HolderIdentity != "b" {
		t.Fatalf("the Lease: %v, %v; want held by b", lease, err)
	}
	// a no longer campaigns, but still finds the leader (it forwards while it stops).
	if addr, self, err := a.Leader(context.Background()); err != nil || self || addr != "10.0.0.2:3000" {
		t.Fatalf("a's view of the leader after stopping: %q self=%v %v; want 10.0.0.2:3000", addr, self, err)
	}
}

// A holder whose pod is gone or going is no leader to forward to.
func TestLeaderWithoutAPod(t *testing.T) {
	going := pod("a", "10.0.0.1")
	going.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for name, cli := range map[string]*fake.Clientset{"gone": fake.NewClientset(), "going": fake.NewClientset(going)} {
		t.Run(name, func(t *testing.T) {
			_, aLeads, _, _ := elector(t, cli, "a")
			within(t, aLeads, 5*time.Second, "a leading")
			b, err := New(Config{Client: cli, Namespace: "warren", Identity: "b", Port: 3000})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go b.Run(ctx, func(context.Context) {}, func() {})
			within(t, b.Changed(), 5*time.Second, "b seeing a lead")
			if _, _, err := b.Leader(context.Background()); !errors.Is(err, ErrNoLeader) {
				t.Fatalf("Leader = %v, want ErrNoLeader", err)
			}
		})
	}
}

// killFloor is how long the kubelet gives a pod deleted with
// --grace-period=0 --force before it kills it: a leader that still runs a
// change then holds the Lease to its kill.
const killFloor = 2 * time.Second

// A holder that vanishes without handing the Lease on (killed while a
// change ran on it, or its node gone) is replaced within the failover's
// goal, 15 s from a forced deletion; and it stops leading before another
// can take the Lease, so that two never lead at once.
func TestVanishedHolderReplacedInTime(t *testing.T) {
	worst := LeaseDuration + 2*time.Duration(2.2*float64(RetryPeriod))
	if worst+killFloor > 15*time.Second-time.Second {
		t.Fatalf("a vanished holder is replaced up to %v after it stopped, %v after a forced deletion: want at least 1 s within the 15 s goal", worst, worst+killFloor)
	}
	synctest.Test(t, func(t *testing.T) {
		for i := range 20 {
			cli := fake.NewClientset(pod("a", "10.0.0.1"), pod("b", "10.0.0.2"))
			// a reaches the API server through its own client, which the
			// kill cuts.
			var killed atomic.Bool
			aCli := fake.NewClientset()
			aCli.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
				if killed.Load() {
					return true, nil, errors.New("killed")
				}
				return k8stesting.ObjectReaction(cli.Tracker())(action)
			})
			_, aLeads, aLost, stopA := elector(t, aCli, "a")
			<-aLeads
			_, bLeads, _, stopB := elector(t, cli, "b")
			// Each kill at another moment of a's and b's tries.
			time.Sleep(3*time.Second + time.Duration(i)*113*time.Millisecond)
			killed.Store(true)
			start := time.Now()
			<-aLost
			stopped := time.Since(start)
			<-bLeads
			took := time.Since(start)
			if took > worst {
				t.Errorf("kill %d: b led %v after a was killed, want ≤ %v", i, took, worst)
			}
			if stopped > took-time.Second {
				t.Errorf("kill %d: a stopped leading %v after its kill, b led %v after it: want a second between", i, stopped, took)
			}
			stopB()
			stopA()
		}
	})
}

// A replica is forced when its pod is gone from the API server, or being
// deleted with the kubelet's 2 s floor or less; not when deleted with a
// grace period, nor outside a pod.
func TestForced(t *testing.T) {
	graced := func(name string, seconds int64) *corev1.Pod {
		p := pod(name, "10.0.0.9")
		p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		p.DeletionGracePeriodSeconds = &seconds
		return p
	}
	cli := fake.NewClientset(pod("running", "10.0.0.1"), graced("graceful", 90), graced("short", 1))
	for _, tc := range []struct {
		name  string
		inPod bool
		want  bool
	}{
		{"running", true, false},
		{"graceful", true, false},
		{"short", true, true},
		{"gone", true, true},
		{"gone", false, false},
	} {
		e, err := New(Config{Client: cli, Namespace: "warren", Identity: tc.name, InPod: tc.inPod, Port: 3000})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Forced(t.Context()); got != tc.want {
			t.Errorf("Forced() of %s (in a pod: %v) = %v, want %v", tc.name, tc.inPod, got, tc.want)
		}
	}
}

// A busy API server's slow or failed answers are asked again: a replica
// whose pod is gone is still found forced, and one whose context ends
// first is not.
func TestForcedAsksAgain(t *testing.T) {
	cli := fake.NewClientset()
	failures := 2
	cli.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures > 0 {
			failures--
			return true, nil, apierrors.NewTimeoutError("the API server is busy", 1)
		}
		return false, nil, nil
	})
	e, err := New(Config{Client: cli, Namespace: "warren", Identity: "gone", InPod: true, Port: 3000})
	if err != nil {
		t.Fatal(err)
	}
	if !e.Forced(t.Context()) || failures != 0 {
		t.Errorf("not found forced after two busy answers (%d left)", failures)
	}
	failures = 1000
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if e.Forced(ctx) {
		t.Error("forced with no answer at all")
	}
}

// The watch of its own pod tells a replica it was force-deleted while the
// API server answers no question in time: Forced says so at once.
func TestForcedSeenByTheWatch(t *testing.T) {
	cli := fake.NewClientset(pod("self", "10.0.0.1"), pod("other", "10.0.0.2"))
	cli.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewTimeoutError("the API server is busy", 1)
	})
	e, err := New(Config{Client: cli, Namespace: "warren", Identity: "self", InPod: true, Port: 3000})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go e.watchOwnPod(ctx)
	watching := func() bool {
		return slices.ContainsFunc(cli.Actions(), func(a k8stesting.Action) bool { return a.GetVerb() == "watch" })
	}
	for deadline := time.Now().Add(5 * time.Second); !watching(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pod not watched")
		}
	}
	ask := func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		return e.Forced(ctx)
	}
	if err := cli.CoreV1().Pods("warren").Delete(ctx, "other", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ask() {
		t.Error("forced by another pod's deletion")
	}
	if err := cli.CoreV1().Pods("warren").Delete(ctx, "self", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if !ask() {
		t.Error("not forced once the watch saw the pod gone, with no answer from the API server")
	}
}

func TestForcedBy(t *testing.T) {
	deleted := func(seconds int64) *corev1.Pod {
		p := pod("self", "10.0.0.1")
		p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		p.DeletionGracePeriodSeconds = &seconds
		return p
	}
	for _, tc := range []struct {
		name string
		ev   watch.Event
		want bool
	}{
		{"running", watch.Event{Type: watch.Modified, Object: pod("self", "10.0.0.1")}, false},
		{"graceful deletion", watch.Event{Type: watch.Modified, Object: deleted(45)}, false},
		{"forced deletion", watch.Event{Type: watch.Modified, Object: deleted(0)}, true},
		{"gone", watch.Event{Type: watch.Deleted, Object: pod("self", "10.0.0.1")}, true},
		{"another pod gone", watch.Event{Type: watch.Deleted, Object: pod("other", "10.0.0.2")}, false},
		{"a watch error", watch.Event{Type: watch.Error, Object: &metav1.Status{}}, false},
	} {
		if got := forcedBy(tc.ev, "self"); got != tc.want {
			t.Errorf("%s: forcedBy = %v, want %v", tc.name, got, tc.want)
		}
	}
}
