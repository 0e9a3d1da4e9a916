package kubernetes

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

type env struct {
	rt    *Runtime
	cli   *fake.Clientset
	nodes *nodes
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cli := fake.NewClientset()
	n := newNodes("node-a")
	b := newBuilder()
	rt, err := New(Config{Client: cli, Images: b, Source: b, Nodes: n,
		Caps: []string{"CHOWN", "KILL"}, StartTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return &env{rt: rt, cli: cli, nodes: n}
}

// kubelet plays the kubelet for the next pod named name: once it exists,
// it is scheduled to node-a and its status becomes what set makes it.
func (e *env) kubelet(t *testing.T, name string, set func(*corev1.Pod)) {
	t.Helper()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			p, err := e.cli.CoreV1().Pods(DefaultNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			p.UID = types.UID("0f0e0d0c-0b0a-4908-8706-050403020100")
			p.Spec.NodeName = "node-a"
			set(p)
			if _, err := e.cli.CoreV1().Pods(DefaultNamespace).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Errorf("kubelet: %v", err)
			}
			return
		}
	}()
}

// started creates a running sandbox pod without a process limit.
func (e *env) started(t *testing.T, id string) sandbox.Container {
	t.Helper()
	e.kubelet(t, PodName(id), runningStatus)
	s := spec(id)
	s.PidsLimit = 0
	c, err := e.rt.Create(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func runningStatus(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = "10.244.0.7"
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: sandboxContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	}}
}

func spec(id string) sandbox.ContainerSpec {
	return sandbox.ContainerSpec{
		SandboxID: id, Image: "warren/base", AgentSecret: "s3cret", AgentArgs: []string{"-code-interpreter"},
		CPUCount: 2, MemoryMB: 512, DiskMB: 1024, PidsLimit: 100,
		Labels: map[string]string{sandbox.LabelTeam: "t1", sandbox.LabelManaged: "true"},
	}
}

func TestPodIsHardenedAndCarriesTheAgent(t *testing.T) {
	e := newEnv(t)
	p := e.rt.podFor(spec("iabc"))
	if p.Name != "warren-iabc" || p.Labels[sandbox.LabelSandbox] != "iabc" || p.Labels[sandbox.LabelManaged] != "true" ||
		p.Labels[sandbox.LabelTeam] != "t1" {
		t.Errorf("name %s labels %v", p.Name, p.Labels)
	}
	s := p.Spec
	if s.RestartPolicy != corev1.RestartPolicyNever || s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken ||
		s.EnableServiceLinks == nil || *s.EnableServiceLinks || s.Hostname != "iabc" {
		t.Errorf("pod spec: %+v", s)
	}
	if s.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("no RuntimeDefault seccomp profile")
	}
	if s.RuntimeClassName != nil {
		t.Errorf("runc pod has runtime class %q", *s.RuntimeClassName)
	}
	if len(s.InitContainers) != 1 || len(s.Containers) != 1 {
		t.Fatalf("%d init containers, %d containers", len(s.InitContainers), len(s.Containers))
	}
	init := s.InitContainers[0]
	if init.Name != initContainer || init.Image != DefaultAgentImage || !slices.Equal(init.Command, []string{AgentImageBinary}) ||
		!slices.Equal(init.Args, []string{"node", "isolate", "--agent-port", "49983", "--install-agent", AgentMountPath}) ||
		init.ImagePullPolicy != corev1.PullNever || *init.SecurityContext.AllowPrivilegeEscalation || !*init.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("init container: %+v", init)
	}
	c := s.Containers[0]
	if c.Image != "warren/base" || !slices.Equal(c.Command, []string{AgentMountPath}) || !slices.Equal(c.Args, []string{"-code-interpreter"}) ||
		c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("container: image %s command %v args %v", c.Image, c.Command, c.Args)
	}
	if len(c.VolumeMounts) != 1 || !c.VolumeMounts[0].ReadOnly || c.VolumeMounts[0].MountPath != "/.warren" {
		t.Errorf("agent mount: %+v", c.VolumeMounts)
	}
	if len(c.Env) != 1 || c.Env[0].Name != agentSecretEnv || c.Env[0].Value != "s3cret" {
		t.Errorf("env: %+v", c.Env)
	}
	sc := c.SecurityContext
	if *sc.RunAsUser != 0 || *sc.Privileged || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"CHOWN", "KILL"}) {
		t.Errorf("security context: %+v", sc)
	}
	lim, req := c.Resources.Limits, c.Resources.Requests
	if lim.Cpu().MilliValue() != 2000 || lim.Memory().Value() != 512<<20 || lim.StorageEphemeral().Value() != 1024<<20 {
		t.Errorf("limits: %v", lim)
	}
	if req.Cpu().MilliValue() != 200 || req.Memory().Value() != 512<<20/10 || req.StorageEphemeral().Value() != 1024<<20/10 {
		t.Errorf("requests: %v", req)
	}
	if p.Annotations[annotationPids] != "100" {
		t.Errorf("annotations: %v", p.Annotations)
	}

	g := spec("igv")
	g.Runtime = sandbox.RuntimeGVisor
	gp := e.rt.podFor(g)
	if rc := gp.Spec.RuntimeClassName; rc == nil || *rc != DefaultRuntimeClass || gp.Labels[sandbox.LabelRuntime] != "gvisor" {
		t.Errorf("gVisor pod's runtime class %v, labels %v", rc, gp.Labels)
	}

	if len(s.TopologySpreadConstraints) != 0 {
		t.Errorf("a sandbox's pod is spread: %+v", s.TopologySpreadConstraints)
	}
	ps := spec("ipooled")
	ps.Labels = map[string]string{sandbox.LabelPool: "true"}
	tsc := e.rt.podFor(ps).Spec.TopologySpreadConstraints
	if len(tsc) != 1 || tsc[0].TopologyKey != corev1.LabelHostname || tsc[0].MaxSkew != 1 || tsc[0].WhenUnsatisfiable != corev1.ScheduleAnyway ||
		!maps.Equal(tsc[0].LabelSelector.MatchLabels, map[string]string{sandbox.LabelManaged: "true", sandbox.LabelPool: "true"}) {
		t.Errorf("a pool pod's spread over the nodes: %+v", tsc)
	}
}

func TestCreateWaitsForThePodToRun(t *testing.T) {
	e := newEnv(t)
	e.kubelet(t, "warren-iabc", runningStatus)
	c, err := e.rt.Create(t.Context(), spec("iabc"))
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != "warren-iabc" || c.SandboxID != "iabc" || !c.Running || c.Paused || c.AgentAddr != "10.244.0.7:49983" ||
		c.IP.String() != "10.244.0.7" || c.ImageID != "sha256:abc" || c.AgentSecret != "s3cret" {
		t.Errorf("created %+v", c)
	}
	if got := e.nodes.got(); !slices.Equal(got, []string{"pids node-a 0f0e0d0c-0b0a-4908-8706-050403020100", "spare node-a 0f0e0d0c-0b0a-4908-8706-050403020100"}) {
		t.Errorf("node agent calls %v, want the process limit set", got)
	}
	in, err := e.rt.Inspect(t.Context(), c.ID)
	if err != nil || in.AgentAddr != c.AgentAddr || !in.Running {
		t.Errorf("inspect: %+v, %v", in, err)
	}
}

func TestCreateThatCannotRunLeavesNoPod(t *testing.T) {
	for name, set := range map[string]func(*corev1.Pod){
		"image missing": func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: sandboxContainer, Image: "warren/nope",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull"}}}}
		},
		"agent install failed": func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: initContainer,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "no agent"}}}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.kubelet(t, "warren-ibad", set)
			_, err := e.rt.Create(t.Context(), spec("ibad"))
			if err == nil {
				t.Fatal("Create succeeded")
			}
			if _, err := e.cli.CoreV1().Pods(DefaultNamespace).Get(t.Context(), "warren-ibad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("pod left behind: %v", err)
			}
		})
	}
}

// A create whose answer is lost (the server stopping while its pool
// refills cancels it) may still have made the pod: it is removed.
func TestCreateCutAfterTheAPIServerMadeThePodLeavesNoPod(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	e.cli.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject()
		if err := e.cli.Tracker().Create(a.GetResource(), obj, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		cancel()
		return true, nil, context.Canceled
	})
	if _, err := e.rt.Create(ctx, spec("icut")); err == nil {
		t.Fatal("Create succeeded")
	}
	if _, err := e.cli.CoreV1().Pods(DefaultNamespace).Get(t.Context(), "warren-icut", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod left behind: %v", err)
	}
}

func TestPodMountsVolumeClaims(t *testing.T) {
	e := newEnv(t)
	s := spec("ivol")
	s.Mounts = []sandbox.Mount{{Source: "warren-va", Target: "/data"}, {Source: "warren-vb", Target: "/mnt/b"}}
	p := e.rt.podFor(s)
	var claims []string
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims = append(claims, v.Name+"="+v.PersistentVolumeClaim.ClaimName)
		}
	}
	var mounts []string
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		if !m.ReadOnly {
			mounts = append(mounts, m.Name+"@"+m.MountPath)
		}
	}
	if want := []string{"volume-0=warren-va", "volume-1=warren-vb"}; !slices.Equal(claims, want) {
		t.Errorf("claims %v, want %v", claims, want)
	}
	if want := []string{"volume-0@/data", "volume-1@/mnt/b"}; !slices.Equal(mounts, want) {
		t.Errorf("read-write mounts %v, want %v", mounts, want)
	}
}

func TestInspectAndListSeeOnlyLivePodsOfThisServer(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	put := func(name, managed string, phase corev1.PodPhase) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: DefaultNamespace,
			Labels: map[string]string{sandbox.LabelManaged: managed, sandbox.LabelSandbox: name}}}
		if name != "open" {
			e.rt.isolate(p, nil)
		}
		runningStatus(p)
		p.Status.Phase = phase
		if _, err := e.cli.CoreV1().Pods(DefaultNamespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put("mine", "true", corev1.PodRunning)
	put("ended", "true", corev1.PodFailed)
	put("other", "server-2", corev1.PodRunning)
	put("open", "true", corev1.PodRunning) // made without the isolator: never adopted
	for id, kind := range map[string]sandbox.Kind{"ended": sandbox.KindNotFound, "other": sandbox.KindNotFound, "none": sandbox.KindNotFound} {
		if _, err := e.rt.Inspect(ctx, id); sandbox.KindOf(err) != kind {
			t.Errorf("Inspect(%s): %v", id, err)
		}
	}
	l, err := e.rt.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range l {
		names = append(names, c.ID+map[bool]string{true: " running", false: " ended"}[c.Running])
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"ended ended", "mine running", "open ended"}) {
		t.Errorf("listed %v", names)
	}
}

func TestFreezeThawAndRemoveGoThroughTheNodeAgent(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	c := e.started(t, "ifz")
	events, err := e.rt.WatchContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Freeze(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if in, err := e.rt.Inspect(ctx, c.ID); err != nil || !in.Running || !in.Paused {
		t.Errorf("frozen pod inspected as %+v, %v", in, err)
	}
	want := func(action sandbox.ContainerAction) {
		t.Helper()
		select {
		case ev := <-events:
			if ev.ContainerID != c.ID || ev.Action != action {
				t.Errorf("event %+v, want %s of %s", ev, action, c.ID)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s event", action)
		}
	}
	want(sandbox.ContainerPaused)
	if err := e.rt.Remove(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	want(sandbox.ContainerDestroyed)
	uid := "0f0e0d0c-0b0a-4908-8706-050403020100"
	if got := e.nodes.got(); !slices.Equal(got, []string{"spare node-a " + uid, "freeze node-a " + uid, "thaw node-a " + uid}) {
		t.Errorf("node agent calls %v, want the agent spared at its start, a freeze, then a thaw before deletion", got)
	}
	if _, err := e.rt.Inspect(ctx, c.ID); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("removed pod inspected: %v", err)
	}
}

func TestAFreezeTheNodeAgentRefusesIsNotRecorded(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	c := e.started(t, "inf")
	e.nodes.err = sandbox.Errorf(sandbox.KindUnavailable, "node agent down")
	if err := e.rt.Freeze(ctx, c.ID); sandbox.KindOf(err) != sandbox.KindUnavailable {
		t.Errorf("Freeze: %v", err)
	}
	if in, _ := e.rt.Inspect(ctx, c.ID); in.Paused {
		t.Error("a failed freeze is recorded")
	}
}

func TestWithoutNodeAgentsFreezingIsUnavailable(t *testing.T) {
	rt, err := New(Config{Client: fake.NewClientset(), Images: newBuilder()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if err := rt.Freeze(t.Context(), "warren-ix"); sandbox.KindOf(err) != sandbox.KindUnavailable {
		t.Errorf("Freeze: %v", err)
	}
}

func TestAPodDeletedBehindTheServersBackIsReported(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	c := e.started(t, "igone")
	events, err := e.rt.WatchContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cli.CoreV1().Pods(DefaultNamespace).Delete(ctx, c.ID, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.ContainerID != c.ID || ev.Action != sandbox.ContainerDestroyed {
			t.Errorf("event %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("deletion not reported")
	}
}

func TestWatchClosesWhenItsContextEnds(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	events, err := e.rt.WatchContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case _, ok := <-events:
		if ok {
			t.Error("an event after cancel")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed")
	}
}

func unschedulableStatus(p *corev1.Pod) {
	p.Spec.NodeName = ""
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/2 nodes are available: 2 Insufficient cpu."}}
}

// A sandbox's pod the scheduler finds no room for asks the warm pools to
// give way (sandbox.Crowdable) and runs once they did; a warm pool pod
// finds no room at once, fails and leaves no pod, since a pool must not
// wait for the room sandboxes need.
func TestUnschedulablePodsAskThePoolsToGiveWay(t *testing.T) {
	e := newEnv(t)
	asked := make(chan struct{}, 10)
	e.rt.OnCrowded(func(context.Context) bool {
		if len(asked) == 0 {
			e.kubelet(t, "warren-iroom", runningStatus)
		}
		asked <- struct{}{}
		return true
	})
	e.kubelet(t, "warren-iroom", unschedulableStatus)
	if _, err := e.rt.Create(t.Context(), spec("iroom")); err != nil {
		t.Fatalf("create after the pools gave way: %v", err)
	}
	if len(asked) != 1 {
		t.Errorf("the pools were asked to give way %d times, want 1", len(asked))
	}

	s := spec("ipool")
	s.Labels = map[string]string{sandbox.LabelPool: "true"}
	e.kubelet(t, "warren-ipool", unschedulableStatus)
	_, err := e.rt.Create(t.Context(), s)
	if sandbox.KindOf(err) != sandbox.KindUnavailable || !strings.Contains(err.Error(), "Insufficient cpu") {
		t.Errorf("unschedulable pool pod: %v, want unavailable saying why", err)
	}
	if _, err := e.cli.CoreV1().Pods(DefaultNamespace).Get(t.Context(), "warren-ipool", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pool pod left behind: %v", err)
	}
	if len(asked) != 1 {
		t.Errorf("a pool pod asked the pools to give way")
	}
}

func TestInspectSaysHowTheSandboxContainerEnded(t *testing.T) {
	e := newEnv(t)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "warren-iend", Namespace: DefaultNamespace,
		Labels: map[string]string{sandbox.LabelManaged: "true", sandbox.LabelSandbox: "iend"}}}
	e.rt.isolate(p, nil)
	runningStatus(p)
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		Reason: "Error", ExitCode: 2, Message: "fatal error: out of memory\n"}}
	if _, err := e.cli.CoreV1().Pods(DefaultNamespace).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := e.rt.Inspect(t.Context(), p.Name)
	if err != nil {
		t.Fatal(err)
	}
	if c.Running || c.Ended != "Error, exit code 2: fatal error: out of memory" {
		t.Errorf("running %v, ended %q", c.Running, c.Ended)
	}
}
