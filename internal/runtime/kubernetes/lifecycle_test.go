package kubernetes

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/warrenhq/warren/internal/lifecycle"
	fakert "github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

// cluster is a fake API server with a kubelet that runs every pod made
// in it: scheduled to one of two nodes in turn, with an IP of its own.
type cluster struct {
	cli     *fake.Clientset
	nodes   *nodes
	builder *builder
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{cli: fake.NewClientset(), nodes: newNodes("node-1", "node-2"), builder: newBuilder()}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := c.cli.CoreV1().Pods(DefaultNamespace).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-w.ResultChan():
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type != watch.Added {
					continue
				}
				i := n.Add(1)
				p.UID = types.UID(uuid.NewString())
				p.Spec.NodeName = fmt.Sprintf("node-%d", i%2+1)
				if vals := pinnedTo(p); vals != nil { // the scheduler keeps to the nodes named
					p.Spec.NodeName = vals[int(i)%len(vals)]
				}
				runningStatus(p)
				p.Status.PodIP = fmt.Sprintf("10.244.%d.%d", i%2+1, i)
				if _, err := c.cli.CoreV1().Pods(DefaultNamespace).Update(ctx, p, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
					t.Errorf("kubelet: %v", err)
				}
			}
		}
	}()
	return c
}

// manager starts a lifecycle manager on the cluster with its store in dir.
func (c *cluster) manager(t *testing.T, dir string) *lifecycle.Manager {
	t.Helper()
	return c.managerWith(t, dir, func(*lifecycle.Settings) {})
}

// managerWith is manager with its settings changed by set.
func (c *cluster) managerWith(t *testing.T, dir string, set func(*lifecycle.Settings)) *lifecycle.Manager {
	t.Helper()
	rt, err := New(Config{Client: c.cli, Images: c.builder, Source: c.builder, Nodes: c.nodes, Instance: "e2e", StartTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	settings := lifecycle.DefaultSettings()
	settings.WarmPool, settings.WarmPoolCodeInterpreter = 0, 0
	settings.ReconcileInterval = time.Hour // events, not the periodic reconcile, must do it
	set(&settings)
	m, err := lifecycle.New(lifecycle.Deps{Runtime: rt, Agent: fakert.NewAgent(), Store: st}, settings)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close()
		st.Close()
		rt.Close()
	})
	return m
}

func (c *cluster) pod(t *testing.T, sandboxID string) (*corev1.Pod, bool) {
	t.Helper()
	p, err := c.cli.CoreV1().Pods(DefaultNamespace).Get(t.Context(), PodName(sandboxID), metav1.GetOptions{})
	return p, err == nil
}

func create(t *testing.T, m *lifecycle.Manager) sandbox.Sandbox {
	t.Helper()
	sb, err := m.Create(t.Context(), lifecycle.CreateRequest{TeamID: sandbox.DefaultTeamID, Template: lifecycle.BaseTemplate, Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func waitState(t *testing.T, m *lifecycle.Manager, id string, want sandbox.State) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		sb, err := m.Get(t.Context(), sandbox.DefaultTeamID, id)
		if err == nil && sb.State == want || want == sandbox.StateKilled && sandbox.KindOf(err) == sandbox.KindNotFound {
			return // a killed sandbox is not found
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: %v, %v; want %s", id, sb.State, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestManagerOnPods(t *testing.T) {
	c := newCluster(t)
	m := c.manager(t, t.TempDir())
	ctx := t.Context()

	sb := create(t, m)
	p, ok := c.pod(t, sb.ID)
	if !ok || p.Labels[sandbox.LabelTeam] != sandbox.DefaultTeamID || p.Labels[sandbox.LabelManaged] != "e2e" {
		t.Fatalf("pod of %s: %v", sb.ID, p)
	}
	if sb.AgentAddr != p.Status.PodIP+":49983" {
		t.Errorf("agent at %s, pod IP %s", sb.AgentAddr, p.Status.PodIP)
	}

	if err := m.Pause(ctx, sandbox.DefaultTeamID, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Get(ctx, sandbox.DefaultTeamID, sb.ID); got.State != sandbox.StatePaused || got.PauseMode != sandbox.PauseFrozen {
		t.Errorf("paused as %s %s", got.State, got.PauseMode)
	}
	if _, _, err := m.Connect(ctx, sandbox.DefaultTeamID, sb.ID, time.Minute, true); err != nil {
		t.Fatal(err)
	}
	node := p.Spec.NodeName
	if err := m.Pause(ctx, sandbox.DefaultTeamID, sb.ID, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Get(ctx, sandbox.DefaultTeamID, sb.ID); got.State != sandbox.StatePaused || got.PauseMode != sandbox.PauseStopped {
		t.Errorf("paused as %s %s", got.State, got.PauseMode)
	}
	if _, ok := c.pod(t, sb.ID); ok {
		t.Error("the stopped sandbox's pod is left")
	}
	if _, ok := c.nodes.has(node, stoppedImage(sb.ID)); !ok {
		t.Errorf("no image of the stopped sandbox's files on %s", node)
	}
	got, _, err := m.Connect(ctx, sandbox.DefaultTeamID, sb.ID, time.Minute, true)
	if err != nil {
		t.Fatal(err)
	}
	p, ok = c.pod(t, sb.ID)
	if !ok || p.Spec.NodeName != node || sandboxImage(p) != imageName(stoppedImage(sb.ID)) || got.AgentAddr != p.Status.PodIP+":49983" {
		t.Fatalf("resumed pod %v (agent at %s), want on %s from the committed image", p, got.AgentAddr, node)
	}

	if err := m.Kill(ctx, sandbox.DefaultTeamID, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.pod(t, sb.ID); ok {
		t.Error("the killed sandbox's pod is left")
	}
	if _, ok := c.nodes.has(node, stoppedImage(sb.ID)); ok {
		t.Error("the killed sandbox's committed image is left")
	}
}

// A frozen sandbox past --freeze-max-age is demoted to stopped, as on
// Docker: committed, its pod thawed and deleted.
func TestAFrozenSandboxTooOldIsStopped(t *testing.T) {
	c := newCluster(t)
	m := c.managerWith(t, t.TempDir(), func(s *lifecycle.Settings) { s.FreezeMaxAge, s.TickInterval = time.Millisecond, 20*time.Millisecond })
	sb := create(t, m)
	p, _ := c.pod(t, sb.ID)
	if err := m.Pause(t.Context(), sandbox.DefaultTeamID, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := m.Get(t.Context(), sandbox.DefaultTeamID, sb.ID)
		if got.PauseMode == sandbox.PauseStopped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s %s", got.State, got.PauseMode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, ok := c.pod(t, sb.ID); ok {
		t.Error("the demoted sandbox's pod is left")
	}
	if calls := c.nodes.got(); !slices.Contains(calls, "thaw "+p.Spec.NodeName+" "+string(p.UID)) {
		t.Errorf("the frozen pod was not thawed before its deletion: %v", calls)
	}
}

// A control plane restarted while a sandbox is stopped finds it stopped
// (its record, not a pod), not vanished, and resumes it on its node.
func TestARestartedManagerKeepsAStoppedSandbox(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	m := c.manager(t, dir)
	sb := create(t, m)
	p, _ := c.pod(t, sb.ID)
	if err := m.Pause(t.Context(), sandbox.DefaultTeamID, sb.ID, false); err != nil {
		t.Fatal(err)
	}
	m.Close()

	m2 := c.manager(t, dir)
	if err := m2.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := m2.Get(t.Context(), sandbox.DefaultTeamID, sb.ID)
	if err != nil || got.State != sandbox.StatePaused || got.PauseMode != sandbox.PauseStopped {
		t.Fatalf("after the restart: %v %s %s", err, got.State, got.PauseMode)
	}
	if _, _, err := m2.Connect(t.Context(), sandbox.DefaultTeamID, sb.ID, time.Minute, true); err != nil {
		t.Fatal(err)
	}
	if p2, ok := c.pod(t, sb.ID); !ok || p2.Spec.NodeName != p.Spec.NodeName || agentSecret(p2) != agentSecret(p) {
		t.Errorf("resumed pod %v, want on %s with the same agent secret", p2, p.Spec.NodeName)
	}
	if _, err := c.cli.CoreV1().ConfigMaps(DefaultNamespace).Get(t.Context(), PodName(sb.ID), metav1.GetOptions{}); err == nil {
		t.Error("the record of the resumed sandbox is left")
	}
}

func TestAPodDeletedBehindTheManagersBackKillsItsSandbox(t *testing.T) {
	c := newCluster(t)
	m := c.manager(t, t.TempDir())
	sb := create(t, m)
	if err := c.cli.CoreV1().Pods(DefaultNamespace).Delete(t.Context(), PodName(sb.ID), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitState(t, m, sb.ID, sandbox.StateKilled)
}

func TestARestartedManagerAdoptsItsPodsAndRemovesStrays(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	m := c.manager(t, dir)
	kept := create(t, m)
	frozen := create(t, m)
	gone := create(t, m)
	if err := m.Pause(t.Context(), sandbox.DefaultTeamID, frozen.ID, true); err != nil {
		t.Fatal(err)
	}
	m.Close() // what a kill -9 leaves is the same: the store and the pods

	if err := c.cli.CoreV1().Pods(DefaultNamespace).Delete(t.Context(), PodName(gone.ID), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	stray := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "warren-istray", Namespace: DefaultNamespace,
		Labels: map[string]string{sandbox.LabelManaged: "e2e", sandbox.LabelSandbox: "istray"}}}
	if _, err := c.cli.CoreV1().Pods(DefaultNamespace).Create(t.Context(), stray, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the kubelet runs it

	m2 := c.manager(t, dir)
	waitState(t, m2, kept.ID, sandbox.StateRunning)
	waitState(t, m2, frozen.ID, sandbox.StatePaused)
	waitState(t, m2, gone.ID, sandbox.StateKilled)
	if _, ok := c.pod(t, "istray"); ok {
		t.Error("the stray pod is left")
	}
	if _, _, err := m2.Connect(t.Context(), sandbox.DefaultTeamID, frozen.ID, time.Minute, true); err != nil {
		t.Errorf("resuming the adopted frozen sandbox: %v", err)
	}
}
