package localpath

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/warrenhq/warren/internal/volume"
)

func claimOn(node, class string, mode corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "ns", UID: "u1", Annotations: map[string]string{annotationSelectedNode: node}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{mode},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}},
	}
}

func newProvisioner(t *testing.T) (*Provisioner, *fake.Clientset, string) {
	t.Helper()
	cli := fake.NewSimpleClientset()
	dir := t.TempDir()
	p, err := New(Config{Client: cli, Node: "n1", Dir: dir, HostDir: "/host/volumes/n1"})
	if err != nil {
		t.Fatal(err)
	}
	p.classes = func(name string) (*storagev1.StorageClass, error) {
		prov := map[string]string{"local": DefaultName, "sized": DefaultName, "odd": DefaultName, "shared": DefaultName, "both": DefaultName, "other": "example.com/x"}[name]
		params := map[string]map[string]string{"sized": {EnforceSize: "true"}, "odd": {"fsType": "xfs"}, "shared": {Shared: "true"},
			"both": {Shared: "true", EnforceSize: "true"}}[name]
		return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: prov, Parameters: params}, nil
	}
	return p, cli, dir
}

func TestProvisionsClaimsOfItsClassOnItsNode(t *testing.T) {
	for _, tc := range []struct {
		name        string
		node, class string
		mode        corev1.PersistentVolumeAccessMode
		want        bool
	}{
		{"ours", "n1", "local", corev1.ReadWriteOnce, true},
		{"another node's", "n2", "local", corev1.ReadWriteOnce, false},
		{"another class's", "n1", "other", corev1.ReadWriteOnce, false},
		{"ReadWriteMany", "n1", "local", corev1.ReadWriteMany, false},
		{"a class with a parameter it does not know", "n1", "odd", corev1.ReadWriteOnce, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, cli, dir := newProvisioner(t)
			p.claim(t.Context(), claimOn(tc.node, tc.class, tc.mode))
			pv, err := cli.CoreV1().PersistentVolumes().Get(t.Context(), "pvc-u1", metav1.GetOptions{})
			if !tc.want {
				if err == nil {
					t.Errorf("provisioned %+v", pv)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pv.Spec.HostPath.Path != "/host/volumes/n1/pvc-u1" || nodeOf(pv) != "n1" || pv.Spec.ClaimRef.Name != "c1" ||
				pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.StorageClassName != "local" {
				t.Errorf("volume %+v", pv.Spec)
			}
			if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.String() != "64Mi" {
				t.Errorf("capacity %s", q.String())
			}
			fi, err := os.Stat(filepath.Join(dir, "pvc-u1"))
			if err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
				t.Errorf("directory %v %v", fi, err)
			}
		})
	}
}

func TestDeletesReleasedVolumesAndTheirDirectories(t *testing.T) {
	p, cli, dir := newProvisioner(t)
	ctx := t.Context()
	p.claim(ctx, claimOn("n1", "local", corev1.ReadWriteOnce))
	os.WriteFile(filepath.Join(dir, "pvc-u1", "f"), []byte("x"), 0o644)
	pv, err := cli.CoreV1().PersistentVolumes().Get(ctx, "pvc-u1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = corev1.VolumeBound
	p.volume(ctx, pv)
	if _, err := os.Stat(filepath.Join(dir, "pvc-u1", "f")); err != nil {
		t.Fatalf("a bound volume lost its content: %v", err)
	}
	pv.Status.Phase = corev1.VolumeReleased
	p.volume(ctx, pv)
	if _, err := os.Stat(filepath.Join(dir, "pvc-u1")); !os.IsNotExist(err) {
		t.Errorf("directory left: %v", err)
	}
	if _, err := cli.CoreV1().PersistentVolumes().Get(ctx, "pvc-u1", metav1.GetOptions{}); err == nil {
		t.Error("volume left")
	}
}

// A class that enforces a size gets a filesystem of the claim's size per
// volume, mounted on its directory: a write past it fails with ENOSPC; a
// filesystem found unmounted (a node restarted) is mounted again; a
// released volume goes with its image. It makes loop-mounted filesystems:
// it needs root and loop devices (CI's machine has both), as
// internal/volume's disk tests.
func TestSizedClassEnforcesTheClaimsSize(t *testing.T) {
	p, cli, dir := newProvisioner(t)
	ctx := t.Context()
	// The temporary directory is no shared mount; this test's mounts
	// need reach no node.
	p.loops = volume.CheckLoops("the test")
	if p.loops != nil {
		t.Fatal(p.loops)
	}
	c := claimOn("n1", "sized", corev1.ReadWriteOnce)
	c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("16Mi")
	p.claim(ctx, c)
	vol := filepath.Join(dir, "pvc-u1")
	t.Cleanup(func() { volume.Unmount(vol) })
	pv, err := cli.CoreV1().PersistentVolumes().Get(ctx, "pvc-u1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if on, err := volume.IsMountPoint(vol); !on || err != nil {
		t.Fatalf("the volume's directory is not a mount: %v %v", on, err)
	}
	fi, err := os.Stat(vol)
	if err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("the volume's root: %v %v, want drwxrwxrwt", fi, err)
	}
	if err := os.WriteFile(filepath.Join(vol, "fits"), make([]byte, 15<<20), 0o644); err != nil {
		t.Fatalf("15 MiB into a 16 MiB volume: %v", err)
	}
	if err := os.WriteFile(filepath.Join(vol, "past"), make([]byte, 4<<20), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a write past the size: %v, want ENOSPC", err)
	}

	if err := volume.Unmount(vol); err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = corev1.VolumeBound
	p.volume(ctx, pv)
	if _, err := os.Stat(filepath.Join(vol, "fits")); err != nil {
		t.Fatalf("a bound volume's filesystem was not mounted again: %v", err)
	}

	pv.Status.Phase = corev1.VolumeReleased
	p.volume(ctx, pv)
	for _, gone := range []string{vol, vol + ".img"} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", gone, err)
		}
	}
	if _, err := cli.CoreV1().PersistentVolumes().Get(ctx, "pvc-u1", metav1.GetOptions{}); err == nil {
		t.Error("volume left")
	}
}

// A provisioner whose volumes directory is not on a shared mount would
// mount volumes' filesystems where the node does not see them: it says so.
func TestSizedClassNeedsASharedMount(t *testing.T) {
	err := checkShared(t.TempDir())
	if err == nil {
		t.Skip("the temporary directory is on a shared mount here")
	}
	p, cli, _ := newProvisioner(t)
	p.loops = err
	p.claim(t.Context(), claimOn("n1", "sized", corev1.ReadWriteOnce))
	if _, err := cli.CoreV1().PersistentVolumes().Get(t.Context(), "pvc-u1", metav1.GetOptions{}); err == nil {
		t.Error("provisioned without a shared mount")
	}
}

// A shared class's volume is a directory of the shared filesystem, made
// only where that filesystem is mounted: on a plain directory (no FUSE
// mount: the mount DaemonSet is not running) nothing is made, and a
// released volume's directory is not removed either.
func TestSharedClassNeedsTheSharedFilesystem(t *testing.T) {
	cli := fake.NewSimpleClientset()
	shared := t.TempDir()
	p, err := New(Config{Client: cli, Node: "n1", Dir: t.TempDir(), HostDir: "/host/volumes/n1", SharedDir: shared, SharedHostDir: "/host/shared"})
	if err != nil {
		t.Fatal(err)
	}
	np, _, _ := newProvisioner(t)
	p.classes = np.classes
	ctx := t.Context()
	for _, class := range []string{"shared", "both"} {
		p.claim(ctx, claimOn("n1", class, corev1.ReadWriteMany))
		if pv, err := cli.CoreV1().PersistentVolumes().Get(ctx, "pvc-u1", metav1.GetOptions{}); err == nil {
			t.Errorf("%s: provisioned on a plain directory: %+v", class, pv.Spec)
		}
		if _, err := os.Stat(filepath.Join(shared, "pvc-u1")); !os.IsNotExist(err) {
			t.Errorf("%s: made a directory outside the shared filesystem: %v", class, err)
		}
	}
	os.Mkdir(filepath.Join(shared, "pvc-u2"), 0o777)
	must := corev1.HostPathDirectory
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-u2", Annotations: map[string]string{annotationProvisionedBy: DefaultName}},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/host/shared/pvc-u2", Type: &must}}},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased}}
	if _, err := cli.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.volume(ctx, pv)
	if _, err := os.Stat(filepath.Join(shared, "pvc-u2")); err != nil {
		t.Errorf("removed a directory where the shared filesystem is not mounted: %v", err)
	}
	if _, err := cli.CoreV1().PersistentVolumes().Get(ctx, "pvc-u2", metav1.GetOptions{}); err != nil {
		t.Errorf("deleted the volume without removing its directory: %v", err)
	}
}
