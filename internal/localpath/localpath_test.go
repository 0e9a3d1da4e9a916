package localpath

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
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
		prov := map[string]string{"local": DefaultName, "other": "example.com/x"}[name]
		return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: prov}, nil
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
