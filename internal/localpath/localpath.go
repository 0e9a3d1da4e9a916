// Package localpath is a local-path provisioner: on each node (a
// DaemonSet, `warren local-path`) it makes the PersistentVolumes of the
// claims of its StorageClass that the scheduler, or Warren's volumes,
// placed on that node (the claim's volume.kubernetes.io/selected-node:
// the class binds WaitForFirstConsumer), each a directory of its own
// under the node's volumes directory, served as a hostPath volume pinned
// to the node by node affinity; and it removes a volume's directory and
// PersistentVolume once its claim is deleted (reclaim policy Delete). Its
// volumes are ReadWriteOnce: a directory on one node. It enforces no size
// (a claim's request is recorded as the volume's capacity), as other
// local-path provisioners.
//
// It does not serve the volumes' content; Warren's node agent does
// (nodeagent.ServeVolumes), from the same directory.
package localpath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// DefaultName is the provisioner's name, which its StorageClass names.
const DefaultName = "warren.dev/local-path"

// Annotations the provisioner reads and writes.
const (
	annotationSelectedNode  = "volume.kubernetes.io/selected-node"
	annotationProvisionedBy = "pv.kubernetes.io/provisioned-by"
)

// Config configures a Provisioner.
type Config struct {
	Client k8s.Interface // required
	// Node is this node's name; required.
	Node string
	// Dir is this node's volumes directory as the provisioner sees it;
	// required.
	Dir string
	// HostDir is the same directory as the kubelet sees it (a
	// hostPath volume's path); required.
	HostDir string
	// Name is the provisioner's name; "" = DefaultName.
	Name string
	// Resync is how often every claim and volume is looked at again,
	// retrying what failed; 0 = 30 s.
	Resync time.Duration
	// Logger; nil = discard.
	Logger *slog.Logger
}

// Provisioner provisions and deletes one node's local-path volumes.
type Provisioner struct {
	cfg     Config
	cli     k8s.Interface
	log     *slog.Logger
	classes func(name string) (*storagev1.StorageClass, error)
}

// New returns a Provisioner; Run runs it.
func New(cfg Config) (*Provisioner, error) {
	if cfg.Client == nil || cfg.Node == "" || cfg.Dir == "" || cfg.HostDir == "" {
		return nil, errors.New("localpath: Client, Node, Dir and HostDir are required")
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.Resync == 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Provisioner{cfg: cfg, cli: cfg.Client, log: cfg.Logger.With("node", cfg.Node)}, nil
}

// Run follows claims and volumes until ctx ends. Every event, and every
// resync, looks at one object; what fails is tried again at the next.
func (p *Provisioner) Run(ctx context.Context) error {
	f := informers.NewSharedInformerFactory(p.cli, p.cfg.Resync)
	sc := f.Storage().V1().StorageClasses()
	p.classes = sc.Lister().Get
	on := func(h func(ctx context.Context, obj any)) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { h(ctx, obj) },
			UpdateFunc: func(_, obj any) { h(ctx, obj) },
		}
	}
	sc.Informer()
	f.Start(ctx.Done())
	defer f.Shutdown()
	// Claims are judged by their class: know the classes first.
	f.WaitForCacheSync(ctx.Done())
	if _, err := f.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(on(p.claim)); err != nil {
		return err
	}
	if _, err := f.Core().V1().PersistentVolumes().Informer().AddEventHandler(on(p.volume)); err != nil {
		return err
	}
	f.Start(ctx.Done())
	<-ctx.Done()
	return nil
}

// claim provisions a pending claim of the class placed on this node.
func (p *Provisioner) claim(ctx context.Context, obj any) {
	c, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok || c.Spec.VolumeName != "" || c.DeletionTimestamp != nil || c.Annotations[annotationSelectedNode] != p.cfg.Node ||
		c.Spec.StorageClassName == nil {
		return
	}
	class, err := p.classes(*c.Spec.StorageClassName)
	if err != nil || class.Provisioner != p.cfg.Name {
		return
	}
	log := p.log.With("claim", c.Namespace+"/"+c.Name)
	if err := p.provision(ctx, c, class); err != nil {
		log.Warn("cannot provision the claim's volume", "err", err)
		return
	}
}

// VolumeName is the PersistentVolume (and directory) of a claim.
func VolumeName(c *corev1.PersistentVolumeClaim) string { return "pvc-" + string(c.UID) }

func (p *Provisioner) provision(ctx context.Context, c *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) error {
	for _, m := range c.Spec.AccessModes {
		if m != corev1.ReadWriteOnce && m != corev1.ReadWriteOncePod {
			return fmt.Errorf("access mode %s: a local-path volume is a directory on one node, ReadWriteOnce", m)
		}
	}
	name := VolumeName(c)
	if _, err := p.cli.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil // made; the PV controller binds it
	}
	dir := filepath.Join(p.cfg.Dir, name)
	// Sandboxes' users of any uid share the tree, as /tmp's do.
	if err := os.Mkdir(dir, 0o777|os.ModeSticky); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		return err
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	must := corev1.HostPathDirectory // a directory gone is an error, never an empty volume
	fsMode := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annotationProvisionedBy: p.cfg.Name}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: c.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   slices.Clone(c.Spec.AccessModes),
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class.Name,
			VolumeMode:                    &fsMode,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: c.Namespace, Name: c.Name,
				UID: c.UID, ResourceVersion: c.ResourceVersion},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(p.cfg.HostDir, name), Type: &must}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{p.cfg.Node}}},
			}}}},
		},
	}
	if _, err := p.cli.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	p.log.Info("provisioned", "claim", c.Namespace+"/"+c.Name, "volume", name, "dir", pv.Spec.HostPath.Path)
	return nil
}

// volume deletes a released volume of this provisioner on this node, and
// its directory.
func (p *Provisioner) volume(ctx context.Context, obj any) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok || pv.Annotations[annotationProvisionedBy] != p.cfg.Name || pv.DeletionTimestamp != nil ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
		(pv.Status.Phase != corev1.VolumeReleased && pv.Status.Phase != corev1.VolumeFailed) || nodeOf(pv) != p.cfg.Node ||
		pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != filepath.Join(p.cfg.HostDir, pv.Name) {
		return
	}
	if err := os.RemoveAll(filepath.Join(p.cfg.Dir, pv.Name)); err != nil {
		p.log.Warn("cannot remove a released volume's directory", "volume", pv.Name, "err", err)
		return
	}
	err := p.cli.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		p.log.Warn("cannot delete a released volume", "volume", pv.Name, "err", err)
		return
	}
	p.log.Info("deleted", "volume", pv.Name)
}

// nodeOf is the one node a volume's node affinity names; "" = none.
func nodeOf(pv *corev1.PersistentVolume) string {
	a := pv.Spec.NodeAffinity
	if a == nil || a.Required == nil || len(a.Required.NodeSelectorTerms) != 1 {
		return ""
	}
	for _, e := range a.Required.NodeSelectorTerms[0].MatchExpressions {
		if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
			return e.Values[0]
		}
	}
	return ""
}
