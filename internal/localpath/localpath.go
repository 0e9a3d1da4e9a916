// Package localpath is a local-path provisioner: on each node (a
// DaemonSet, `warren local-path`) it makes the PersistentVolumes of the
// claims of its StorageClass that the scheduler, or Warren's volumes,
// placed on that node (the claim's volume.kubernetes.io/selected-node:
// the class binds WaitForFirstConsumer), each a directory of its own
// under the node's volumes directory, served as a hostPath volume pinned
// to the node by node affinity; and it removes a volume's directory and
// PersistentVolume once its claim is deleted (reclaim policy Delete). Its
// volumes are ReadWriteOnce: a directory on one node.
//
// A class with the parameter enforceSize: "true" gets volumes of the
// claim's size: each its own ext4 filesystem in a sparse image beside the
// directory, loop-mounted on it (internal/volume's, as the Docker engine's
// volumes with --volume-size-mb), so that a write past the size fails
// with ENOSPC. The mount must reach the node (the kubelet binds the
// directory into pods) and the node agent: the provisioner runs
// privileged with the volumes directory mounted Bidirectional, which needs
// a shared mount on the node. A class without it enforces no size (the
// request is recorded as the volume's capacity), as other local-path
// provisioners.
//
// A class with the parameter shared: "true" gets ReadWriteMany volumes:
// each a directory of a distributed filesystem (MooseFS, scripts/kube/
// moosefs.yaml) that a DaemonSet mounts with FUSE at the same path on
// every node (Config.SharedDir), served as a hostPath volume pinned to no
// node, so that pods on several nodes mount it at once. The provisioner
// makes and removes such a directory only where the filesystem is mounted
// (a FUSE mount): never a directory of the node's own disk in its place.
//
// It does not serve the volumes' content; Warren's node agent does
// (nodeagent.ServeVolumes and ServeSharedVolumes), from the same
// directories.
package localpath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/warrenhq/warren/internal/volume"
)

// DefaultName is the provisioner's name, which its StorageClass names.
const DefaultName = "warren.dev/local-path"

// EnforceSize is the StorageClass parameter ("true" or "false", the
// default) that makes each volume a filesystem of the claim's size.
const EnforceSize = "enforceSize"

// Shared is the StorageClass parameter ("true" or "false", the default)
// that makes each volume a directory of the shared filesystem under
// Config.SharedDir, which every node mounts: ReadWriteMany.
const Shared = "shared"

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
	// SharedDir is where the shared filesystem is mounted, as the
	// provisioner sees it; "" = none, a claim of a shared class fails.
	SharedDir string
	// SharedHostDir is the same directory as the kubelet sees it, on
	// every node; required with SharedDir.
	SharedHostDir string
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
	// loops is why this node cannot loop-mount filesystems, which
	// classes that enforce a size need; nil = it can.
	loops error
}

// New returns a Provisioner; Run runs it.
func New(cfg Config) (*Provisioner, error) {
	if cfg.Client == nil || cfg.Node == "" || cfg.Dir == "" || cfg.HostDir == "" {
		return nil, errors.New("localpath: Client, Node, Dir and HostDir are required")
	}
	if (cfg.SharedDir == "") != (cfg.SharedHostDir == "") {
		return nil, errors.New("localpath: SharedDir and SharedHostDir go together")
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
	p := &Provisioner{cfg: cfg, cli: cfg.Client, log: cfg.Logger.With("node", cfg.Node)}
	p.loops = volume.CheckLoops("a StorageClass with " + EnforceSize + ": \"true\" gives each volume its own ext4 filesystem on a loop device")
	if p.loops == nil {
		p.loops = checkShared(cfg.Dir)
	}
	if p.loops != nil {
		p.log.Warn("volumes of classes that enforce a size cannot be made on this node", "err", p.loops)
	}
	return p, nil
}

// Run follows claims and volumes until ctx ends. Every event, and every
// resync, looks at one object; what fails is tried again at the next.
func (p *Provisioner) Run(ctx context.Context) error {
	// Only root (the kubelet, the node agent) goes in: volumes hold what
	// sandboxes' root made.
	if err := os.MkdirAll(p.cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("volumes directory: %w", err)
	}
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
	params, err := parameters(class)
	if err != nil {
		return err
	}
	if !params.shared {
		for _, m := range c.Spec.AccessModes {
			if m != corev1.ReadWriteOnce && m != corev1.ReadWriteOncePod {
				return fmt.Errorf("access mode %s: a local-path volume is a directory on one node, ReadWriteOnce (a class with %s: \"true\" has ReadWriteMany volumes)", m, Shared)
			}
		}
	}
	name := VolumeName(c)
	if _, err := p.cli.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil // made; the PV controller binds it
	}
	hostDir := filepath.Join(p.cfg.HostDir, name)
	affinity := &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{p.cfg.Node}}},
	}}}}
	dir := filepath.Join(p.cfg.Dir, name)
	switch {
	case params.shared:
		if err := p.sharedMounted(); err != nil {
			return err
		}
		if err := makeDir(filepath.Join(p.cfg.SharedDir, name)); err != nil {
			return err
		}
		hostDir, affinity = filepath.Join(p.cfg.SharedHostDir, name), nil
	case params.sized:
		size := c.Spec.Resources.Requests[corev1.ResourceStorage]
		if err := p.makeDisk(name, size.Value()); err != nil {
			return err
		}
	default:
		if err := makeDir(dir); err != nil {
			return err
		}
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
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDir, Type: &must}},
			NodeAffinity:           affinity,
		},
	}
	if _, err := p.cli.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	p.log.Info("provisioned", "claim", c.Namespace+"/"+c.Name, "volume", name, "dir", pv.Spec.HostPath.Path)
	return nil
}

// makeDir makes a volume's directory, which sandboxes' users of any uid
// share, as /tmp's.
func makeDir(dir string) error {
	if err := os.Mkdir(dir, 0o777|os.ModeSticky); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return os.Chmod(dir, 0o777|os.ModeSticky)
}

// classParams are a class's parameters.
type classParams struct{ sized, shared bool }

// parameters reads the class's parameters: EnforceSize and Shared, not
// both, and no other.
func parameters(class *storagev1.StorageClass) (classParams, error) {
	for k, v := range class.Parameters {
		if k != EnforceSize && k != Shared {
			return classParams{}, fmt.Errorf("StorageClass %s: unknown parameter %q (this provisioner knows %s and %s only)", class.Name, k, EnforceSize, Shared)
		}
		if v != "true" && v != "false" {
			return classParams{}, fmt.Errorf("StorageClass %s: %s is %q, want \"true\" or \"false\"", class.Name, k, v)
		}
	}
	c := classParams{sized: class.Parameters[EnforceSize] == "true", shared: class.Parameters[Shared] == "true"}
	if c.sized && c.shared {
		return classParams{}, fmt.Errorf("StorageClass %s: %s and %s together: a shared volume is a directory of the shared filesystem, whose size this provisioner does not enforce", class.Name, EnforceSize, Shared)
	}
	return c, nil
}

// fuseMagic is a FUSE filesystem's statfs type (linux/magic.h).
const fuseMagic = 0x65735546

// sharedMounted tells whether the shared filesystem is mounted at
// SharedDir: a shared volume made or removed on the directory under it
// would be the node's own disk, which no other node sees.
func (p *Provisioner) sharedMounted() error {
	if p.cfg.SharedDir == "" {
		return fmt.Errorf("a StorageClass with %s: \"true\": this provisioner has no shared filesystem (--shared-dir)", Shared)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p.cfg.SharedDir, &st); err != nil {
		return fmt.Errorf("the shared filesystem at %s: %w", p.cfg.SharedDir, err)
	}
	if st.Type != fuseMagic {
		return fmt.Errorf("the shared filesystem is not mounted at %s on this node (a FUSE mount, of the shared filesystem's mount DaemonSet): no shared volume is made or removed here until it is", p.cfg.SharedDir)
	}
	return nil
}

// minDiskMB is the smallest filesystem a volume gets: below it ext4's own
// metadata would be most of it.
const minDiskMB = 8

// makeDisk makes the volume name a filesystem in which size bytes of
// files fit (rounded up to MiB), mounted on its directory: its image
// written under a temporary name and renamed, so that a provisioner
// stopped half way leaves no image that looks whole.
func (p *Provisioner) makeDisk(name string, size int64) error {
	if p.loops != nil {
		return p.loops
	}
	img := p.image(name)
	if _, err := os.Stat(img); errors.Is(err, os.ErrNotExist) {
		mb := max(int((size+1<<20-1)>>20), minDiskMB)
		if err := volume.MakeImage(img+".new", mb); err != nil {
			return err
		}
		if err := os.Rename(img+".new", img); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	return volume.MountImage(img, filepath.Join(p.cfg.Dir, name))
}

// checkShared tells whether dir is on a shared mount, as a filesystem
// mounted under it must be to reach the node (and from there the kubelet's
// pods and the node agent): else the provisioner would mount it where
// nobody but itself sees it.
func checkShared(dir string) error {
	mounts, err := mountinfo.GetMounts(mountinfo.ParentsFilter(dir))
	if err != nil {
		return fmt.Errorf("cannot read this process's mounts: %w", err)
	}
	var m *mountinfo.Info
	for _, c := range mounts {
		if m == nil || len(c.Mountpoint) > len(m.Mountpoint) {
			m = c
		}
	}
	if m == nil || !strings.Contains(" "+m.Optional, " shared:") {
		return fmt.Errorf("the volumes directory %s is not on a shared mount here, so a volume's filesystem mounted by the provisioner would not reach the node: mount it with mountPropagation: Bidirectional (a privileged container), from a node whose mount of it is shared (mount --make-shared)", dir)
	}
	return nil
}

// image is where the filesystem of the volume name is kept: beside its
// directory, a name no volume's directory has.
func (p *Provisioner) image(name string) string { return filepath.Join(p.cfg.Dir, name+".img") }

// volume looks at a volume of this provisioner on this node: a released
// one is deleted with its directory (and filesystem); a filesystem not
// mounted (the node restarted) is mounted again.
func (p *Provisioner) volume(ctx context.Context, obj any) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok || pv.Annotations[annotationProvisionedBy] != p.cfg.Name || pv.DeletionTimestamp != nil || pv.Spec.HostPath == nil {
		return
	}
	if p.cfg.SharedHostDir != "" && pv.Spec.NodeAffinity == nil && pv.Spec.HostPath.Path == filepath.Join(p.cfg.SharedHostDir, pv.Name) {
		p.sharedVolume(ctx, pv)
		return
	}
	if nodeOf(pv) != p.cfg.Node || pv.Spec.HostPath.Path != filepath.Join(p.cfg.HostDir, pv.Name) {
		return
	}
	released := pv.Status.Phase == corev1.VolumeReleased || pv.Status.Phase == corev1.VolumeFailed
	if !released {
		if err := p.remount(pv.Name); err != nil {
			p.log.Warn("cannot mount a volume's filesystem again", "volume", pv.Name, "err", err)
		}
		return
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return
	}
	if err := p.remove(pv.Name); err != nil {
		p.log.Warn("cannot remove a released volume's directory", "volume", pv.Name, "err", err)
		return
	}
	p.deleteVolume(ctx, pv)
}

// sharedVolume deletes a released shared volume with its directory. Any
// node's provisioner may (the node that made it may be gone); each one
// that tries after the first finds nothing left to do.
func (p *Provisioner) sharedVolume(ctx context.Context, pv *corev1.PersistentVolume) {
	if pv.Status.Phase != corev1.VolumeReleased && pv.Status.Phase != corev1.VolumeFailed ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return
	}
	if err := p.sharedMounted(); err != nil {
		p.log.Warn("cannot remove a released shared volume's directory", "volume", pv.Name, "err", err)
		return
	}
	if err := os.RemoveAll(filepath.Join(p.cfg.SharedDir, pv.Name)); err != nil {
		p.log.Warn("cannot remove a released shared volume's directory", "volume", pv.Name, "err", err)
		return
	}
	p.deleteVolume(ctx, pv)
}

// deleteVolume deletes a released volume whose content is gone.
func (p *Provisioner) deleteVolume(ctx context.Context, pv *corev1.PersistentVolume) {
	err := p.cli.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		p.log.Warn("cannot delete a released volume", "volume", pv.Name, "err", err)
		return
	}
	p.log.Info("deleted", "volume", pv.Name)
}

// remount mounts the filesystem of the volume name on its directory
// unless it is there, or the volume has none.
func (p *Provisioner) remount(name string) error {
	img := p.image(name)
	if _, err := os.Stat(img); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	dir := filepath.Join(p.cfg.Dir, name)
	if on, err := volume.IsMountPoint(dir); err != nil || on {
		return err
	}
	p.log.Info("mounting a volume's filesystem again", "volume", name)
	return volume.MountImage(img, dir)
}

// remove removes the volume name's directory and, if it has one, its
// filesystem: unmounted first, so that its files go with the image.
func (p *Provisioner) remove(name string) error {
	dir := filepath.Join(p.cfg.Dir, name)
	if err := volume.Unmount(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.Remove(p.image(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
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
