package kubernetes

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// A pod cannot stop and start again keeping its files, so a stopped
// sandbox is no pod: Stop commits the sandbox container's files to an
// image on its node (the node agent's commit), records the pod in a
// ConfigMap of the same name, and deletes the pod. The record is what
// List and Inspect report as the stopped container, so that
// reconciliation, which trusts the cluster and not the store, finds the
// sandbox after a restart of the control plane. Start makes the pod again
// from the record, pinned to that node and running the committed image,
// under the same name, labels and agent secret: the manager adopts it as
// the same container. Remove removes the pod, the record and the image.
//
// The image stays while the sandbox lives: its pod runs it, and the next
// Stop commits on top of it under the same name.

// stoppedRepo is the repository of stopped sandboxes' images.
const stoppedRepo = "warren/stopped"

// stoppedImage is the image a sandbox's files are committed to when it
// stops.
func stoppedImage(sandboxID string) string { return stoppedRepo + ":" + sandboxID }

// LabelStopped marks the ConfigMap recording a stopped sandbox's pod.
const LabelStopped = "dev.warren.stopped"

// Keys of a stopped sandbox's record.
const (
	recordNode    = "node"
	recordImage   = "image"
	recordImageID = "image-id"
	recordPod     = "pod" // the pod as JSON, to make again
)

// errStop is why a pod cannot be stopped on a server without node agents:
// committing its files takes the node agent of its node.
var errStop = sandbox.Errorf(sandbox.KindUnavailable,
	"pausing without memory (stopped) needs Warren's node agent (the warren-node DaemonSet of deploy/kubernetes/), which this server was not given: pause keeping memory (frozen) instead")

// stopped is a stopped sandbox's record.
type stopped struct {
	node, image, imageID string
	pod                  *corev1.Pod
}

// record reads the record of stopped sandbox pod id; KindNotFound when
// there is none.
func (r *Runtime) record(ctx context.Context, id string) (*stopped, error) {
	cm, err := r.cli.CoreV1().ConfigMaps(r.ns).Get(ctx, id, metaGet)
	if err != nil {
		return nil, classify(err, "cannot read the stopped sandbox's record")
	}
	return r.recordOf(cm)
}

func (r *Runtime) recordOf(cm *corev1.ConfigMap) (*stopped, error) {
	if cm.Labels[sandbox.LabelManaged] != r.cfg.Instance || cm.Labels[LabelStopped] != "true" {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "no stopped sandbox %s", cm.Name)
	}
	s := &stopped{node: cm.Data[recordNode], image: cm.Data[recordImage], imageID: cm.Data[recordImageID], pod: &corev1.Pod{}}
	if err := json.Unmarshal([]byte(cm.Data[recordPod]), s.pod); err != nil || s.node == "" || s.image == "" {
		return nil, sandbox.Errorf(sandbox.KindInternal, "the record of stopped sandbox %s (ConfigMap %s/%s) is damaged: delete it", cm.Name, r.ns, cm.Name)
	}
	s.pod.Name = cm.Name
	return s, nil
}

// containerOfRecord is a stopped sandbox as the lifecycle manager sees
// its container.
func containerOfRecord(s *stopped) sandbox.Container {
	return sandbox.Container{
		ID:          s.pod.Name,
		SandboxID:   s.pod.Labels[sandbox.LabelSandbox],
		Labels:      s.pod.Labels,
		ImageID:     s.imageID,
		AgentSecret: agentSecret(s.pod),
	}
}

// Stop commits a running or frozen pod's files to an image on its node,
// records it, and deletes it. A sandbox stopped already is left as it is.
func (r *Runtime) Stop(ctx context.Context, id string) error {
	p, err := r.get(ctx, id)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		if _, rerr := r.record(ctx, id); rerr == nil {
			return nil
		}
	}
	if err != nil {
		return err
	}
	if r.cfg.Nodes == nil {
		return errStop
	}
	if !running(p) {
		return sandbox.Errorf(sandbox.KindConflict, "the sandbox's pod is not running: there is nothing to stop")
	}
	node := p.Spec.NodeName
	img, err := r.cfg.Nodes.Commit(ctx, node, string(p.UID), sandboxContainer, stoppedImage(p.Labels[sandbox.LabelSandbox]), commitLabels(p))
	if err != nil {
		return sandbox.Wrap(sandbox.KindOf(err), err, "cannot save the sandbox's files on its node")
	}
	r.noteImage(node, img)
	if err := r.putRecord(ctx, p, img.Name, img.ID); err != nil {
		return err
	}
	if err := r.deletePod(ctx, p); err != nil {
		// It still runs: a stale record would make it look stopped once
		// it ends.
		r.deleteRecord(context.WithoutCancel(ctx), id)
		return err
	}
	r.waitGone(ctx, p)
	return nil
}

// commitLabels are the labels an image committed from pod p adds to its
// own, as the Docker engine's commit keeps them from the container: its
// team (which makes it Warren's, sandbox.Image.Warrens) and the runtime
// its sandboxes need.
func commitLabels(p *corev1.Pod) map[string]string {
	l := map[string]string{}
	for _, k := range []string{sandbox.LabelTeam, sandbox.LabelRuntime} {
		if v := p.Labels[k]; v != "" {
			l[k] = v
		}
	}
	return l
}

// putRecord records pod p as stopped, its files committed to image (of
// ID imageID) on its node; a record left by an earlier stop is replaced.
func (r *Runtime) putRecord(ctx context.Context, p *corev1.Pod, image, imageID string) error {
	keep := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Labels: p.Labels, Annotations: maps.Clone(p.Annotations)},
		Spec:       *p.Spec.DeepCopy(),
	}
	delete(keep.Annotations, annotationFrozen)
	b, err := json.Marshal(keep)
	if err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "cannot record the stopped sandbox")
	}
	labels := maps.Clone(p.Labels)
	labels[LabelStopped] = "true"
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: r.ns, Labels: labels},
		Data:       map[string]string{recordNode: p.Spec.NodeName, recordImage: image, recordImageID: imageID, recordPod: string(b)},
	}
	cms := r.cli.CoreV1().ConfigMaps(r.ns)
	_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	return classify(err, "cannot record the stopped sandbox (a ConfigMap of its namespace)")
}

// deleteRecord deletes a stopped sandbox's record, if any.
func (r *Runtime) deleteRecord(ctx context.Context, id string) {
	err := r.cli.CoreV1().ConfigMaps(r.ns).Delete(ctx, id, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		r.log.WarnContext(ctx, "cannot delete a stopped sandbox's record", logkey.Container, id, "err", err)
	}
}

// waitGone waits a while for the informer to see pod p gone, so that a
// Start right after makes its new pod under the same name.
func (r *Runtime) waitGone(ctx context.Context, p *corev1.Pod) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		changed := r.changed(p.Name)
		cur, err := r.pods.Get(p.Name)
		if err != nil || cur.UID != p.UID {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// Start returns a pod that runs as it is (the manager adopts it), and
// makes a stopped sandbox's pod again from its record: on the node that
// has its files, from the image they were committed to. The record goes
// once the pod runs.
func (r *Runtime) Start(ctx context.Context, id string) (sandbox.Container, error) {
	p, err := r.get(ctx, id)
	if err == nil {
		if !running(p) {
			if p, err = r.waitRunning(ctx, id); err != nil {
				return sandbox.Container{}, err
			}
		}
		return r.containerOf(p), nil
	}
	if sandbox.KindOf(err) != sandbox.KindNotFound {
		return sandbox.Container{}, err
	}
	rec, rerr := r.record(ctx, id)
	if rerr != nil {
		if sandbox.KindOf(rerr) == sandbox.KindNotFound {
			return sandbox.Container{}, err
		}
		return sandbox.Container{}, rerr
	}
	pod := podFromRecord(rec, r.ns)
	limit, _ := strconv.Atoi(pod.Annotations[annotationPids])
	c, err := r.run(ctx, pod, limit)
	if sandbox.KindOf(err) == sandbox.KindConflict {
		// The stopped pod is still being deleted under that name, or it
		// ended (a crash between its record and its deletion).
		if old, gerr := r.cli.CoreV1().Pods(r.ns).Get(ctx, id, metaGet); gerr == nil {
			if derr := r.delete(ctx, old); derr != nil {
				return sandbox.Container{}, derr
			}
			r.waitGone(ctx, old)
			c, err = r.run(ctx, podFromRecord(rec, r.ns), limit)
		}
	}
	if err != nil {
		return sandbox.Container{}, err
	}
	r.deleteRecord(ctx, id)
	return c, nil
}

// podFromRecord is the pod a stopped sandbox starts again in.
func podFromRecord(rec *stopped, ns string) *corev1.Pod {
	pod := rec.pod.DeepCopy()
	pod.Namespace = ns
	pod.ResourceVersion, pod.UID = "", ""
	pod.Status = corev1.PodStatus{}
	pod.Spec.NodeName = ""
	pod.Spec.Priority = nil // the admission computes it, and refuses one given
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[annotationImageID] = rec.imageID
	setSandboxImage(pod, rec.image, "")
	pinTo(pod, []string{rec.node})
	return pod
}
