package kubernetes

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/phases"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Create creates the sandbox's pod and waits until its agent runs. On any
// failure after the pod exists it is deleted, so a failed Create leaks
// nothing.
func (r *Runtime) Create(ctx context.Context, spec sandbox.ContainerSpec) (sandbox.Container, error) {
	if spec.SandboxID == "" || spec.Image == "" {
		return sandbox.Container{}, sandbox.Errorf(sandbox.KindInvalid, "sandbox ID and image are required")
	}
	pod := r.podFor(spec)
	at, err := r.placeImage(ctx, spec.Image)
	if err != nil {
		return sandbox.Container{}, err
	}
	phases.Mark(ctx, "image_place")
	pod.Annotations[annotationImageID] = at.id
	if at.pull != "" {
		// A name by digest names one image for good.
		setSandboxImage(pod, at.pull, corev1.PullIfNotPresent)
	}
	pinTo(pod, at.nodes)
	return r.run(ctx, pod, spec.PidsLimit)
}

// run creates pod and waits until its agent runs, with the process limit
// applied; on failure the pod is deleted.
func (r *Runtime) run(ctx context.Context, pod *corev1.Pod, pidsLimit int) (sandbox.Container, error) {
	nets, err := r.refused(ctx)
	if err != nil {
		return sandbox.Container{}, err
	}
	r.isolate(pod, nets)
	if _, err := r.cli.CoreV1().Pods(r.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		// Without the API server's answer (a cancelled context, a cut
		// connection) the pod may have been made all the same: a server
		// stopping while its pool refills would leave it to no one.
		var answer apierrors.APIStatus
		if !errors.As(err, &answer) {
			r.deletePodQuietly(ctx, pod.Name)
		}
		return sandbox.Container{}, classify(err, "cannot create the sandbox's pod")
	}
	phases.Mark(ctx, "engine_create")
	p, err := r.waitRunning(ctx, pod.Name)
	if err == nil && pidsLimit > 0 {
		err = r.applyPidsLimit(ctx, p, pidsLimit)
		phases.Mark(ctx, "pids_limit")
	}
	if err != nil {
		r.deletePodQuietly(ctx, pod.Name)
		return sandbox.Container{}, err
	}
	r.spareAgent(ctx, p)
	return r.containerOf(p), nil
}

// spareAgent has the node agent give the pod's init and agent the OOM
// score they have on Docker, under their users' processes, before any
// user reaches the pod. A node agent that cannot is warned of once per
// node, and the sandbox runs on with the kubelet's score: its agent may
// then be the OOM killer's first choice inside the pod's memory limit,
// and its init starts it again.
func (r *Runtime) spareAgent(ctx context.Context, p *corev1.Pod) {
	if r.cfg.Nodes == nil {
		return
	}
	err := r.cfg.Nodes.SpareAgent(ctx, p.Spec.NodeName, string(p.UID))
	phases.Mark(ctx, "spare_agent")
	if err == nil {
		return
	}
	if _, warned := r.unspared.LoadOrStore(p.Spec.NodeName, true); !warned {
		r.log.WarnContext(ctx, "sandbox agents on this node keep the kubelet's OOM score, and the OOM killer may take them before their users' processes: run the node agent with hostPID and the capability SYS_RESOURCE (deploy/kubernetes/node-agent.yaml)",
			"node", p.Spec.NodeName, logkey.Container, p.Name, "err", err)
	}
}

// pinTo lets pod run only on nodes; nil nodes: anywhere. A node is
// matched by its name, one term each: the API takes a single value for a
// field selector, and terms are alternatives.
func pinTo(pod *corev1.Pod, nodes []string) {
	if nodes == nil {
		return
	}
	var terms []corev1.NodeSelectorTerm
	for _, n := range slices.Sorted(slices.Values(nodes)) {
		terms = append(terms, corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{n},
		}}})
	}
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
}

// pinnedTo returns the nodes pinTo let pod run on; nil: any.
func pinnedTo(pod *corev1.Pod) []string {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	var out []string
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			out = append(out, f.Values...)
		}
	}
	return out
}

// waitRunning waits until the named pod's sandbox container runs and the
// pod has an IP, following the informer; it fails at once when the pod
// cannot get there (its image is missing, its agent failed to install).
// It marks the steps of the start as the informer shows them (podSteps).
func (r *Runtime) waitRunning(ctx context.Context, name string) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StartTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), r.informer.HasSynced) {
		return nil, sandbox.Errorf(sandbox.KindUnavailable, "cannot list the sandboxes' pods")
	}
	var last *corev1.Pod
	var gaveWay time.Time
	var steps podSteps
	for {
		var recheck <-chan time.Time // while unschedulable: give way again even if the pod does not change
		changed := r.changed(name)
		p, err := r.pods.Get(name)
		switch {
		case apierrors.IsNotFound(err):
			if last != nil {
				return nil, sandbox.Errorf(sandbox.KindConflict, "the sandbox's pod was deleted while it started")
			}
		case err != nil:
			return nil, classify(err, "cannot read the sandbox's pod")
		default:
			last = p
			if running(p) && p.Status.PodIP != "" {
				steps.mark(ctx, p)
				phases.Mark(ctx, "engine_start")
				return p, nil
			}
			steps.mark(ctx, p)
			if err := startFailure(p); err != nil {
				if sandbox.KindOf(err) == sandbox.KindUnavailable && p.Spec.NodeName != "" {
					r.forgetNode(p.Spec.NodeName) // its image is not there after all
				}
				return nil, err
			}
			if why, ok := unschedulable(p); ok {
				if p.Labels[sandbox.LabelPool] != "" {
					return nil, sandbox.Errorf(sandbox.KindUnavailable, "no node has room for another warm pool pod: %s", why)
				}
				if time.Since(gaveWay) >= giveWayEvery {
					gaveWay = time.Now()
					if g := r.giveWay.Load(); g != nil && (*g)(ctx) {
						r.log.Info("no node had room for a sandbox's pod; a warm pool pod gave way", "pod", name, "why", why)
					}
				}
				recheck = time.After(time.Until(gaveWay.Add(giveWayEvery)))
			}
		}
		select {
		case <-recheck:
		case <-changed:
		case <-ctx.Done():
			return nil, sandbox.Errorf(sandbox.KindUnavailable, "the sandbox's pod did not start within %v%s%s",
				r.cfg.StartTimeout, pending(last), claimHint(last))
		}
	}
}

// podSteps marks the steps of a pod's start the first time the informer
// shows each done, in order: bound to a node ("pod_scheduled"), its init
// container done ("pod_initialized"); the rest, up to the sandbox
// container running with an address, is "engine_start". A step shown
// together with a later one takes the time of both.
type podSteps struct{ scheduled, initialized bool }

func (s *podSteps) mark(ctx context.Context, p *corev1.Pod) {
	if !s.scheduled && p.Spec.NodeName != "" {
		s.scheduled = true
		phases.Mark(ctx, "pod_scheduled")
	}
	if s.scheduled && !s.initialized && podCondition(p, corev1.PodInitialized) {
		s.initialized = true
		phases.Mark(ctx, "pod_initialized")
	}
}

// podCondition reports whether pod p's condition of type t is true.
func podCondition(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// giveWayEvery spaces the warm pool pods one sandbox's pod asks to give
// way while the scheduler finds no room for it: a deleted pod's requests
// are freed once it is gone, and the scheduler tries again then.
const giveWayEvery = 2 * time.Second

// OnCrowded is sandbox.Crowdable.
func (r *Runtime) OnCrowded(giveWay func(context.Context) bool) { r.giveWay.Store(&giveWay) }

// claimHint says, for a pod that mounts volumes and found no node, that a
// ReadWriteOnce volume holds its sandboxes to one node.
func claimHint(p *corev1.Pod) string {
	if p == nil {
		return ""
	}
	if _, ok := unschedulable(p); !ok {
		return ""
	}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return fmt.Sprintf(" (it mounts volume claim %s: a ReadWriteOnce volume is on one node, every sandbox that mounts it runs there, and that node has no room for one more; kill a sandbox there, or use a ReadWriteMany StorageClass)", v.PersistentVolumeClaim.ClaimName)
		}
	}
	return ""
}

// unschedulable says why the scheduler found no node for p, while it finds
// none.
func unschedulable(p *corev1.Pod) (string, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message, true
		}
	}
	return "", false
}

// startFailure says why a pod will never run, or nil while it may.
func startFailure(p *corev1.Pod) error {
	if p.DeletionTimestamp != nil {
		return sandbox.Errorf(sandbox.KindConflict, "the sandbox's pod was deleted while it started")
	}
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName":
				return sandbox.Errorf(sandbox.KindUnavailable, "image %s is not on node %s, or its kubelet will not run it (%s): removed behind the server's back? try again (it is imported anew), or import it into the node's containerd. "+
					"A kubelet that pulled the same image from a registry under another name (another server's --registry) refuses it by this name unless its imagePullCredentialsVerificationPolicy is NeverVerify: run one way of delivering images per cluster",
					cs.Image, p.Spec.NodeName, w.Reason)
			case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return sandbox.Errorf(sandbox.KindInternal, "container %s of the sandbox's pod cannot start: %s: %s", cs.Name, w.Reason, w.Message)
			}
		}
		if t := cs.State.Terminated; t != nil && (cs.Name == sandboxContainer || t.ExitCode != 0) {
			return sandbox.Errorf(sandbox.KindInternal, "container %s of the sandbox's pod ended (%s, exit code %d): %s",
				cs.Name, t.Reason, t.ExitCode, strings.TrimSpace(t.Message))
		}
	}
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return sandbox.Errorf(sandbox.KindInternal, "the sandbox's pod ended: %s %s", p.Status.Reason, p.Status.Message)
	}
	return nil
}

// pending says what keeps a pod from running, for a timeout's message.
func pending(p *corev1.Pod) string {
	if p == nil {
		return ""
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			return fmt.Sprintf(" (%s: %s)", c.Type, c.Message)
		}
	}
	return fmt.Sprintf(" (phase %s)", p.Status.Phase)
}

// running reports whether a pod's sandbox container runs.
func running(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == sandboxContainer {
			return cs.State.Running != nil
		}
	}
	return false
}

// containerOf is a pod as the lifecycle manager sees a container.
func (r *Runtime) containerOf(p *corev1.Pod) sandbox.Container {
	c := sandbox.Container{
		ID:        p.Name,
		SandboxID: p.Labels[sandbox.LabelSandbox],
		Labels:    p.Labels,
		// A pod made without the isolator (by a server before it) is open
		// to the cluster: reported ended, so reconciliation removes it
		// instead of adopting it.
		Running: running(p) && isolated(p),
	}
	c.Paused = c.Running && p.Annotations[annotationFrozen] == "true"
	c.Ended = ended(p)
	c.AgentSecret = agentSecret(p)
	c.ImageID = p.Annotations[annotationImageID]
	if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil && c.Running {
		c.IP = ip
		c.AgentAddr = net.JoinHostPort(ip.String(), strconv.Itoa(sandbox.AgentPort))
	}
	return c
}

// ended says how pod p's sandbox container ended: the kubelet's reason,
// exit code and message (with TerminationMessageFallbackToLogsOnError, the
// end of the agent's log when it failed); "" while it has not.
func ended(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; cs.Name == sandboxContainer && t != nil {
			s := fmt.Sprintf("%s, exit code %d", cmp.Or(t.Reason, "ended"), t.ExitCode)
			if m := strings.TrimSpace(t.Message); m != "" {
				s += ": " + m
			}
			return s
		}
	}
	return ""
}

// agentSecret is the agent secret pod p's sandbox container was made with.
func agentSecret(p *corev1.Pod) string {
	for _, ct := range p.Spec.Containers {
		if ct.Name != sandboxContainer {
			continue
		}
		for _, e := range ct.Env {
			if e.Name == agentSecretEnv {
				return e.Value
			}
		}
	}
	return ""
}

// setSandboxImage makes pod's sandbox container run image, pulled as pull
// says ("": as it was).
func setSandboxImage(pod *corev1.Pod, image string, pull corev1.PullPolicy) {
	for i := range pod.Spec.Containers {
		if ct := &pod.Spec.Containers[i]; ct.Name == sandboxContainer {
			ct.Image = image
			ct.ImagePullPolicy = cmp.Or(pull, ct.ImagePullPolicy)
		}
	}
}

// sandboxImage is the image pod p's sandbox container runs.
func sandboxImage(p *corev1.Pod) string {
	for _, ct := range p.Spec.Containers {
		if ct.Name == sandboxContainer {
			return ct.Image
		}
	}
	return ""
}

// get reads a pod afresh from the API server. A pod being deleted, or one
// that ended (its restart policy is Never: it cannot run again), is
// KindNotFound: its sandbox is gone.
func (r *Runtime) get(ctx context.Context, id string) (*corev1.Pod, error) {
	p, err := r.cli.CoreV1().Pods(r.ns).Get(ctx, id, metaGet)
	if err != nil {
		return nil, classify(err, "cannot read the sandbox's pod")
	}
	if p.Labels[sandbox.LabelManaged] != r.cfg.Instance {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "no sandbox pod %s", id)
	}
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "the sandbox's pod %s has ended", id)
	}
	return p, nil
}

// Inspect returns a sandbox pod's current state, or a stopped sandbox's
// from its record. Running is true for a frozen pod too; Paused tells them
// apart.
func (r *Runtime) Inspect(ctx context.Context, id string) (sandbox.Container, error) {
	p, err := r.get(ctx, id)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		if rec, rerr := r.record(ctx, id); rerr == nil {
			return containerOfRecord(rec), nil
		} else if sandbox.KindOf(rerr) != sandbox.KindNotFound {
			return sandbox.Container{}, rerr
		}
	}
	if err != nil {
		return sandbox.Container{}, err
	}
	return r.containerOf(p), nil
}

// List returns every pod labelled as this runtime's, ended ones included
// (not running) so that reconciliation removes them, and every stopped
// sandbox (not running either) whose pod is gone; pods being deleted are
// left out.
func (r *Runtime) List(ctx context.Context) ([]sandbox.Container, error) {
	var out []sandbox.Container
	listed := map[string]bool{}
	opts := metav1.ListOptions{LabelSelector: r.selector(), Limit: 500}
	for {
		res, err := r.cli.CoreV1().Pods(r.ns).List(ctx, opts)
		if err != nil {
			return nil, classify(err, "cannot list the sandboxes' pods")
		}
		for i := range res.Items {
			if p := &res.Items[i]; p.DeletionTimestamp == nil {
				out = append(out, r.containerOf(p))
				listed[p.Name] = true
			}
		}
		if opts.Continue = res.Continue; opts.Continue == "" {
			break
		}
	}
	opts = metav1.ListOptions{LabelSelector: r.selector() + "," + LabelStopped + "=true", Limit: 500}
	for {
		res, err := r.cli.CoreV1().ConfigMaps(r.ns).List(ctx, opts)
		if err != nil {
			return nil, classify(err, "cannot list the stopped sandboxes' records")
		}
		for i := range res.Items {
			cm := &res.Items[i]
			if listed[cm.Name] {
				continue // its pod runs again; the record goes once Start sees it run
			}
			rec, err := r.recordOf(cm)
			if err != nil {
				r.log.WarnContext(ctx, "skipping a stopped sandbox's record", logkey.Container, cm.Name, "err", err)
				continue
			}
			out = append(out, containerOfRecord(rec))
		}
		if opts.Continue = res.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

// Remove removes a sandbox: its pod at once (no grace period, thawed
// first: processes frozen in their cgroup cannot die), the record of it
// stopped, and the image its files were committed to on its node.
func (r *Runtime) Remove(ctx context.Context, id string) error {
	p, err := r.cli.CoreV1().Pods(r.ns).Get(ctx, id, metaGet)
	if err != nil && !apierrors.IsNotFound(err) {
		return classify(err, "cannot read the sandbox's pod")
	}
	if err != nil {
		p = nil
	}
	rec, err := r.record(ctx, id)
	if err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
		return err
	}
	if p == nil && rec == nil {
		return sandbox.Errorf(sandbox.KindNotFound, "no sandbox pod %s", id)
	}
	var node, committed string
	if p != nil {
		node = p.Spec.NodeName
		if img, sb := sandboxImage(p), stoppedImage(p.Labels[sandbox.LabelSandbox]); imageName(img) == imageName(sb) {
			committed = sb
		}
		if err := r.deletePod(ctx, p); err != nil {
			return err
		}
	}
	if rec != nil {
		node = cmp.Or(node, rec.node)
		committed = rec.image
		r.deleteRecord(ctx, id)
	}
	if committed != "" && node != "" && r.cfg.Nodes != nil {
		err := r.cfg.Nodes.RemoveImage(ctx, node, committed)
		if err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
			r.log.ErrorContext(ctx, "cannot remove a stopped sandbox's image from its node: remove it there (ctr -n k8s.io images rm)",
				logkey.Container, id, "node", node, logkey.Image, committed, "err", err)
		} else {
			r.forgetImage(node, committed)
		}
	}
	return nil
}

// deletePod deletes pod p at once, thawing it first, once its neighbours'
// pods are closed to its address.
func (r *Runtime) deletePod(ctx context.Context, p *corev1.Pod) error {
	if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil {
		if f := r.beforeDelete.Load(); f != nil {
			(*f)(ctx, ip)
		}
	}
	if p.Annotations[annotationFrozen] == "true" && r.cfg.Nodes != nil {
		if err := r.cfg.Nodes.Thaw(ctx, p.Spec.NodeName, string(p.UID)); err != nil {
			r.log.WarnContext(ctx, "thawing a frozen pod before deleting it", logkey.Container, p.Name, "err", err)
		}
	}
	r.forgetSample(p.Name)
	return r.delete(ctx, p)
}

// delete deletes the pod p names, if it is still the same pod.
func (r *Runtime) delete(ctx context.Context, p *corev1.Pod) error {
	zero := int64(0)
	uid := p.UID
	err := r.cli.CoreV1().Pods(r.ns).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if apierrors.IsConflict(err) {
		// Another pod of that name replaced it: this one is gone.
		return nil
	}
	return classify(err, "cannot delete the sandbox's pod")
}

// deletePodQuietly deletes a pod during cleanup of a failed operation,
// even when ctx is already cancelled.
func (r *Runtime) deletePodQuietly(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	p, err := r.cli.CoreV1().Pods(r.ns).Get(ctx, id, metaGet)
	if err == nil {
		err = r.deletePod(ctx, p)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		r.log.WarnContext(ctx, "cleanup: deleting pod", logkey.Container, id, "err", err)
	}
}

// Commit saves a running or frozen pod's files as the image ref on its
// node (the node agent's commit), and returns ref. The image is on that
// node only: the pods made of it are placed accordingly (placeImage).
func (r *Runtime) Commit(ctx context.Context, id, ref string) (string, error) {
	if ref == "" {
		return "", sandbox.Errorf(sandbox.KindInvalid, "a snapshot needs an image reference")
	}
	p, err := r.nodeOp(ctx, id, "saving the files of")
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		if _, rerr := r.record(ctx, id); rerr == nil {
			return "", sandbox.Errorf(sandbox.KindConflict,
				"a stopped sandbox's files are an image on its node, which the node agent cannot copy under another name: resume it, then snapshot it")
		}
	}
	if err != nil {
		return "", err
	}
	if !running(p) {
		return "", sandbox.Errorf(sandbox.KindConflict, "the sandbox's pod is not running")
	}
	img, err := r.cfg.Nodes.Commit(ctx, p.Spec.NodeName, string(p.UID), sandboxContainer, ref, commitLabels(p))
	if err != nil {
		return "", err
	}
	r.noteImage(p.Spec.NodeName, img)
	if n, err := reference.ParseNormalizedNamed(ref); err == nil && reference.FamiliarName(n) == sandbox.SnapshotRepo {
		r.toBuilder(p.Spec.NodeName, ref)
	}
	return ref, nil
}

// Freeze freezes every process of a running pod through the node agent of
// its node, memory kept, and records it on the pod.
func (r *Runtime) Freeze(ctx context.Context, id string) error {
	p, err := r.nodeOp(ctx, id, "freezing")
	if err != nil {
		return err
	}
	if !running(p) {
		return sandbox.Errorf(sandbox.KindConflict, "the sandbox's pod is not running")
	}
	if err := r.cfg.Nodes.Freeze(ctx, p.Spec.NodeName, string(p.UID)); err != nil {
		return err
	}
	if err := r.annotate(ctx, id, annotationFrozen, "true"); err != nil {
		// Unrecorded, a freeze would look like a hang: undo it.
		if terr := r.cfg.Nodes.Thaw(context.WithoutCancel(ctx), p.Spec.NodeName, string(p.UID)); terr != nil {
			r.log.ErrorContext(ctx, "cannot thaw a pod whose freeze was not recorded", logkey.Container, id, "err", terr)
		}
		return err
	}
	return nil
}

// Thaw resumes a frozen pod.
func (r *Runtime) Thaw(ctx context.Context, id string) error {
	p, err := r.nodeOp(ctx, id, "thawing")
	if err != nil {
		return err
	}
	if err := r.cfg.Nodes.Thaw(ctx, p.Spec.NodeName, string(p.UID)); err != nil {
		return err
	}
	if err := r.annotate(ctx, id, annotationFrozen, ""); err != nil {
		return err
	}
	if f := r.afterThaw.Load(); f != nil {
		(*f)(ctx)
	}
	return nil
}

// nodeOp reads the pod an operation of the node agent is for.
func (r *Runtime) nodeOp(ctx context.Context, id, what string) (*corev1.Pod, error) {
	if r.cfg.Nodes == nil {
		return nil, sandbox.Errorf(sandbox.KindUnavailable,
			"%s a sandbox needs Warren's node agent (the warren-node DaemonSet of deploy/kubernetes/), which this server was not given", what)
	}
	return r.get(ctx, id)
}

// annotate sets (value "") or removes an annotation of a pod.
func (r *Runtime) annotate(ctx context.Context, id, key, value string) error {
	var v any
	if value != "" {
		v = value
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: v}}})
	_, err := r.cli.CoreV1().Pods(r.ns).Patch(ctx, id, types.MergePatchType, patch, metav1.PatchOptions{})
	return classify(err, "cannot record the sandbox's state on its pod")
}

// applyPidsLimit has the node agent cap a pod's processes: the API has no
// per-pod limit (only the kubelet's, for every pod of a node).
func (r *Runtime) applyPidsLimit(ctx context.Context, p *corev1.Pod, limit int) error {
	if r.cfg.Nodes == nil {
		return nil // New warned once
	}
	return r.cfg.Nodes.SetPidsLimit(ctx, p.Spec.NodeName, string(p.UID), limit)
}

// Update changes a running pod's CPU and memory limits in place (the
// resize subresource) and its process limit through the node agent; a
// zero limit is left as it is.
func (r *Runtime) Update(ctx context.Context, id string, cpuCount, memoryMB, pidsLimit int) error {
	p, err := r.get(ctx, id)
	if err != nil {
		return err
	}
	if cpuCount > 0 || memoryMB > 0 {
		want := r.resources(sandbox.ContainerSpec{CPUCount: cpuCount, MemoryMB: memoryMB})
		for i := range p.Spec.Containers {
			ct := &p.Spec.Containers[i]
			if ct.Name != sandboxContainer {
				continue
			}
			mergeResources(&ct.Resources, want)
		}
		if _, err := r.cli.CoreV1().Pods(r.ns).UpdateResize(ctx, id, p, metav1.UpdateOptions{}); err != nil {
			return classify(err, "cannot resize the sandbox's pod")
		}
	}
	if pidsLimit > 0 {
		if r.cfg.Nodes == nil {
			return sandbox.Errorf(sandbox.KindUnavailable, "changing a sandbox's process limit needs Warren's node agent")
		}
		return r.applyPidsLimit(ctx, p, pidsLimit)
	}
	return nil
}

// mergeResources sets in dst the limits and requests src has.
func mergeResources(dst *corev1.ResourceRequirements, src corev1.ResourceRequirements) {
	set := func(l *corev1.ResourceList, from corev1.ResourceList) {
		if *l == nil {
			*l = corev1.ResourceList{}
		}
		for k, v := range from {
			(*l)[k] = v
		}
	}
	set(&dst.Limits, src.Limits)
	set(&dst.Requests, src.Requests)
}

// cpuLimit is the CPUs a pod's sandbox container may use; 0 = no limit.
func cpuLimit(p *corev1.Pod) float64 {
	for _, ct := range p.Spec.Containers {
		if ct.Name == sandboxContainer {
			if q, ok := ct.Resources.Limits[corev1.ResourceCPU]; ok {
				return float64(q.MilliValue()) / 1000
			}
		}
	}
	return 0
}

// memoryLimit is a pod's sandbox container's memory limit in bytes; 0 =
// none.
func memoryLimit(p *corev1.Pod) int64 {
	for _, ct := range p.Spec.Containers {
		if ct.Name == sandboxContainer {
			if q, ok := ct.Resources.Limits[corev1.ResourceMemory]; ok {
				return q.Value()
			}
		}
	}
	return 0
}
