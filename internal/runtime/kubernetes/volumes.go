package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/nodeagent"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/volume"
)

// LabelVolume names the volume a PersistentVolumeClaim holds.
const LabelVolume = "dev.warren.volume"

// annotationSelectedNode is the node a claim of a WaitForFirstConsumer
// class is to be provisioned on: what the scheduler sets for a claim's
// first pod, and Volumes sets at once (see CreateClaim).
const annotationSelectedNode = "volume.kubernetes.io/selected-node"

// VolumeAgents are the node agents' calls Volumes makes (NodeAgentPods).
type VolumeAgents interface {
	Nodes(ctx context.Context) ([]string, error)
	ForwardVolume(ctx context.Context, node, method, path, rawQuery string, header http.Header, body io.Reader) (*http.Response, error)
	VolumeUsage(ctx context.Context, node, prefix, name string) (int64, error)
}

// Volumes keeps Warren's volumes as PersistentVolumeClaims in the
// namespace of the sandboxes, of StorageClass Class (the cluster's default
// when ""), and answers their content API through a node agent: for a
// ReadWriteOnce volume, the agent of the node that holds the claim's
// PersistentVolume, a hostPath or local volume as the local-path
// provisioner (package localpath) makes them, whose directory the node
// agent serves (nodeagent.ServeVolumes); for a ReadWriteMany one, a
// hostPath volume on no node in particular (a directory of the
// distributed filesystem every node mounts), the agent of the node the
// claim was placed on (nodeagent.ServeSharedVolumes).
type Volumes struct {
	cli      k8s.Interface
	ns       string
	class    string
	mode     corev1.PersistentVolumeAccessMode
	instance string
	agents   VolumeAgents
	log      *slog.Logger
	// bindWait bounds how long a content call waits for a new claim's
	// volume; 0 = 60 s.
	bindWait time.Duration
}

var _ volume.Claims = (*Volumes)(nil)

// NewVolumes returns the claims of volumes in namespace ns, of the
// StorageClass class ("" = the default) and access mode ("" =
// ReadWriteOnce; ReadWriteMany for a class whose volumes every node
// mounts, which lets a volume's sandboxes spread over the nodes),
// labelled for instance. Without agents (nil) the claims are made and
// mounted, and the content API is unavailable.
func NewVolumes(cli k8s.Interface, ns, class string, mode corev1.PersistentVolumeAccessMode, instance string, agents VolumeAgents, log *slog.Logger) *Volumes {
	return &Volumes{cli: cli, ns: cmp.Or(ns, DefaultNamespace), class: class, mode: cmp.Or(mode, corev1.ReadWriteOnce),
		instance: cmp.Or(instance, sandbox.DefaultInstance), agents: agents, log: logkey.For(log, "volumes")}
}

// AccessMode reads an access mode as --volume-access-mode takes it: ""
// (ReadWriteOnce), ReadWriteOnce or ReadWriteMany.
func AccessMode(s string) (corev1.PersistentVolumeAccessMode, error) {
	switch m := corev1.PersistentVolumeAccessMode(s); m {
	case "", corev1.ReadWriteOnce, corev1.ReadWriteMany:
		return m, nil
	}
	return "", sandbox.Errorf(sandbox.KindInvalid, "volume access mode %q: want ReadWriteOnce or ReadWriteMany", s)
}

// ClaimName is the PersistentVolumeClaim of volume id.
func (v *Volumes) ClaimName(id string) string { return "warren-" + id }

// CreateClaim makes volume id's claim of sizeMB. The claim names the node
// with the fewest of this server's volumes as its selected node, as the
// scheduler would for its first pod: a WaitForFirstConsumer class (the
// local-path provisioner's) provisions it at once, so its content API
// answers before any sandbox mounts it, and its sandboxes are then
// scheduled there (the volume's node affinity). A class that binds at
// once ignores it.
func (v *Volumes) CreateClaim(ctx context.Context, id string, sizeMB int) error {
	node, err := v.quietNode(ctx)
	if err != nil {
		return err
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        v.ClaimName(id),
			Namespace:   v.ns,
			Labels:      map[string]string{sandbox.LabelManaged: v.instance, LabelVolume: id},
			Annotations: map[string]string{},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{v.mode},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: *resource.NewQuantity(int64(sizeMB)<<20, resource.BinarySI),
			}},
		},
	}
	if node != "" {
		pvc.Annotations[annotationSelectedNode] = node
	}
	if v.class != "" {
		pvc.Spec.StorageClassName = &v.class
	}
	if _, err := v.cli.CoreV1().PersistentVolumeClaims(v.ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return classify(err, "cannot create the volume's PersistentVolumeClaim")
	}
	return nil
}

// quietNode is the node agent's node with the fewest of this server's
// claims; "" without node agents.
func (v *Volumes) quietNode(ctx context.Context) (string, error) {
	if v.agents == nil {
		return "", nil
	}
	nodes, err := v.agents.Nodes(ctx)
	if err != nil || len(nodes) == 0 {
		return "", err
	}
	slices.Sort(nodes)
	claims, err := v.cli.CoreV1().PersistentVolumeClaims(v.ns).List(ctx, metav1.ListOptions{LabelSelector: sandbox.LabelManaged + "=" + v.instance + "," + LabelVolume})
	if err != nil {
		return "", classify(err, "cannot list the volumes' claims")
	}
	count := map[string]int{}
	for _, c := range claims.Items {
		count[c.Annotations[annotationSelectedNode]]++
	}
	best := nodes[0]
	for _, n := range nodes[1:] {
		if count[n] < count[best] {
			best = n
		}
	}
	return best, nil
}

// DeleteClaim deletes volume id's claim; the class's reclaim policy
// (Delete, for the local-path provisioner) then removes its content.
func (v *Volumes) DeleteClaim(ctx context.Context, id string) error {
	err := v.cli.CoreV1().PersistentVolumeClaims(v.ns).Delete(ctx, v.ClaimName(id), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return classify(err, "cannot delete the volume's PersistentVolumeClaim")
	}
	return nil
}

// ServeContent forwards a content API request to the node agent of the
// node that holds volume id, which answers it from the volume's
// directory; its answer (E2B's shapes already) is passed on as it is.
//
// It returns only once the forward has let go of the request's body: a
// node agent may answer before it read all of a body (413 for a full
// volume), while the transport is still sending it, and a transport
// reading the body after its handler returned races the server, which
// then reads the rest itself; the client's next request on that
// connection failed so (its context cancelled).
func (v *Volumes) ServeContent(w http.ResponseWriter, r *http.Request, id string) error {
	loc, err := v.locate(r.Context(), id)
	if err != nil {
		return err
	}
	h := http.Header{}
	for _, k := range []string{"Content-Type", "Content-Length"} {
		if val := r.Header.Get(k); val != "" {
			h.Set(k, val)
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	var body io.Reader
	if r.ContentLength != 0 {
		b := &forwardedBody{r: r.Body}
		defer func() { cancel(); b.stop() }()
		body = b
	}
	defer cancel()
	res, err := v.agents.ForwardVolume(ctx, loc.node, r.Method, loc.prefix+loc.dir+"/"+r.PathValue("op"), r.URL.RawQuery, h, body)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	for _, k := range []string{"Content-Type", "Content-Length"} {
		if val := res.Header.Get(k); val != "" {
			w.Header().Set(k, val)
		}
	}
	w.WriteHeader(res.StatusCode)
	io.Copy(w, res.Body) // a client that goes away ends the copy
	return nil
}

// forwardedBody is a request's body as a forward sends it on, until the
// handler stops it: an http.RoundTripper may go on reading a request's
// body after it returned (its answer came early).
type forwardedBody struct {
	mu      sync.Mutex // held across a read
	r       io.Reader
	stopped bool
}

func (b *forwardedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return 0, errForwardDone
	}
	return b.r.Read(p)
}

// stop waits for a read under way and fails every later one: an error,
// not EOF, so that a transport still sending ends its request cut short.
func (b *forwardedBody) stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
}

var errForwardDone = errors.New("the content request was answered: its body is not forwarded further")

// UsedBytes asks the node agent of the volume's node for the size of its
// files.
func (v *Volumes) UsedBytes(ctx context.Context, id string) (int64, error) {
	loc, err := v.locate(ctx, id)
	if err != nil {
		return 0, err
	}
	return v.agents.VolumeUsage(ctx, loc.node, loc.prefix, loc.dir)
}

// location is where a node agent serves a volume: the agent of node, at
// prefix+dir (nodeagent.VolumesPrefix or SharedVolumesPrefix).
type location struct{ node, prefix, dir string }

// locate returns where volume id's content is served, waiting for a new
// claim to be bound.
func (v *Volumes) locate(ctx context.Context, id string) (location, error) {
	if v.agents == nil {
		return location{}, sandbox.Errorf(sandbox.KindUnavailable, "the volume content API goes through the node agents, and this server has none (--node-token-secret is empty)")
	}
	wait := v.bindWait
	if wait == 0 {
		wait = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var pvc *corev1.PersistentVolumeClaim
	var err error
	for {
		pvc, err = v.cli.CoreV1().PersistentVolumeClaims(v.ns).Get(ctx, v.ClaimName(id), metaGet)
		if apierrors.IsNotFound(err) {
			return location{}, sandbox.Errorf(sandbox.KindNotFound, "volume %s has no PersistentVolumeClaim %s: deleted behind the server's back?", id, v.ClaimName(id))
		}
		if err != nil {
			return location{}, classify(err, "cannot read the volume's PersistentVolumeClaim")
		}
		if pvc.Spec.VolumeName != "" {
			break
		}
		select {
		case <-ctx.Done():
			return location{}, sandbox.Errorf(sandbox.KindUnavailable, "the volume's PersistentVolumeClaim %s is not bound to a volume after %v: is the StorageClass's provisioner running?", pvc.Name, wait)
		case <-time.After(200 * time.Millisecond):
		}
	}
	pv, err := v.cli.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metaGet)
	if err != nil {
		return location{}, classify(err, "cannot read the volume's PersistentVolume")
	}
	if shared(pv) {
		return v.sharedLocation(ctx, pvc, pv)
	}
	node, dir, err := volumeLocation(pv)
	return location{node, nodeagent.VolumesPrefix, dir}, err
}

// shared tells a ReadWriteMany volume of the local-path provisioner's
// shared class: a hostPath volume that names no node, a directory of the
// distributed filesystem that every node mounts at its path.
func shared(pv *corev1.PersistentVolume) bool {
	return pv.Spec.HostPath != nil && pv.Spec.NodeAffinity == nil && slices.Contains(pv.Spec.AccessModes, corev1.ReadWriteMany)
}

// sharedLocation serves a shared volume from the node its claim was
// placed on (which made it), else from any node with an agent.
func (v *Volumes) sharedLocation(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) (location, error) {
	nodes, err := v.agents.Nodes(ctx)
	if err != nil {
		return location{}, err
	}
	if len(nodes) == 0 {
		return location{}, sandbox.Errorf(sandbox.KindUnavailable, "no node agent runs to serve volume %s", pv.Name)
	}
	node := slices.Min(nodes)
	if n := pvc.Annotations[annotationSelectedNode]; slices.Contains(nodes, n) {
		node = n
	}
	return location{node, nodeagent.SharedVolumesPrefix, path.Base(pv.Spec.HostPath.Path)}, nil
}

// volumeLocation is the node of a hostPath or local PersistentVolume
// (its node affinity) and its directory's name.
func volumeLocation(pv *corev1.PersistentVolume) (node, dir string, err error) {
	var p string
	switch {
	case pv.Spec.HostPath != nil:
		p = pv.Spec.HostPath.Path
	case pv.Spec.Local != nil:
		p = pv.Spec.Local.Path
	default:
		return "", "", sandbox.Errorf(sandbox.KindUnavailable, "the content API reaches hostPath and local PersistentVolumes only (the local-path provisioner's); volume %s is neither", pv.Name)
	}
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil {
		for _, t := range a.Required.NodeSelectorTerms {
			for _, e := range t.MatchExpressions {
				if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
					return e.Values[0], path.Base(p), nil
				}
			}
		}
	}
	return "", "", sandbox.Errorf(sandbox.KindUnavailable, "PersistentVolume %s names no node (%s In [one node]) to serve its content from", pv.Name, corev1.LabelHostname)
}
