package kubernetes

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/sandbox"
)

// fakeVolumeAgents records what Volumes forwards, and answers 201.
type fakeVolumeAgents struct {
	nodes []string
	got   []string // node method path?query body
}

func (f *fakeVolumeAgents) Nodes(context.Context) ([]string, error) { return f.nodes, nil }

func (f *fakeVolumeAgents) ForwardVolume(_ context.Context, node, method, path, rawQuery string, _ http.Header, body io.Reader) (*http.Response, error) {
	var b []byte
	if body != nil {
		b, _ = io.ReadAll(body)
	}
	f.got = append(f.got, node+" "+method+" "+path+"?"+rawQuery+" "+string(b))
	return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(`{"path":"/f"}`))}, nil
}

func (f *fakeVolumeAgents) VolumeUsage(context.Context, string, string, string) (int64, error) {
	return 7, nil
}

func TestCreateClaimSpreadsOverNodesAndCountsItsSize(t *testing.T) {
	cli := fake.NewSimpleClientset()
	agents := &fakeVolumeAgents{nodes: []string{"n2", "n1"}}
	v := NewVolumes(cli, "", "fast", "", "i1", agents, nil)
	ctx := t.Context()
	for _, id := range []string{"va", "vb", "vc"} {
		if err := v.CreateClaim(ctx, id, 64); err != nil {
			t.Fatal(err)
		}
	}
	var nodes []string
	for _, id := range []string{"va", "vb", "vc"} {
		c, err := cli.CoreV1().PersistentVolumeClaims(DefaultNamespace).Get(ctx, "warren-"+id, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if q := c.Spec.Resources.Requests[corev1.ResourceStorage]; q.Value() != 64<<20 {
			t.Errorf("%s requests %s", id, q.String())
		}
		if *c.Spec.StorageClassName != "fast" || c.Spec.AccessModes[0] != corev1.ReadWriteOnce || c.Labels[LabelVolume] != id || c.Labels[sandbox.LabelManaged] != "i1" {
			t.Errorf("%s: %+v", id, c)
		}
		nodes = append(nodes, c.Annotations[annotationSelectedNode])
	}
	if strings.Join(nodes, ",") != "n1,n2,n1" {
		t.Errorf("selected nodes %v, want the quietest each time", nodes)
	}
	if err := v.DeleteClaim(ctx, "va"); err != nil {
		t.Fatal(err)
	}
	if err := v.DeleteClaim(ctx, "va"); err != nil {
		t.Errorf("a second delete: %v", err)
	}
}

func TestServeContentForwardsToTheVolumesNode(t *testing.T) {
	ctx := t.Context()
	cli := fake.NewSimpleClientset()
	agents := &fakeVolumeAgents{}
	v := NewVolumes(cli, "", "", "", "", agents, nil)
	v.bindWait = 300 * time.Millisecond
	if err := v.CreateClaim(ctx, "va", 8); err != nil {
		t.Fatal(err)
	}
	serve := func() *httptest.ResponseRecorder {
		mux := http.NewServeMux()
		rec := httptest.NewRecorder()
		mux.HandleFunc("/volumecontent/{volumeID}/{op}", func(w http.ResponseWriter, r *http.Request) {
			if err := v.ServeContent(w, r, "va"); err != nil {
				rec.Code = httpedge.Status(err)
			}
		})
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/volumecontent/va/file?path=/f&force=true", strings.NewReader("hello")))
		return rec
	}
	if rec := serve(); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("unbound claim: %d, want 503", rec.Code)
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/warren/volumes/pvc-1"}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"n2"}}},
		}}}},
	}}
	if _, err := cli.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c, _ := cli.CoreV1().PersistentVolumeClaims(DefaultNamespace).Get(ctx, "warren-va", metav1.GetOptions{})
	c.Spec.VolumeName = "pvc-1"
	if _, err := cli.CoreV1().PersistentVolumeClaims(DefaultNamespace).Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec := serve()
	if rec.Code != http.StatusCreated || rec.Body.String() != `{"path":"/f"}` {
		t.Errorf("answer %d %q", rec.Code, rec.Body)
	}
	if want := "n2 PUT /v1/volumes/pvc-1/file?path=/f&force=true hello"; len(agents.got) != 1 || agents.got[0] != want {
		t.Errorf("forwarded %q, want %q", agents.got, want)
	}
	if n, err := v.UsedBytes(ctx, "va"); err != nil || n != 7 {
		t.Errorf("used %d, %v", n, err)
	}
}

func TestAReadWriteManyVolumeIsServedFromItsClaimsNode(t *testing.T) {
	ctx := t.Context()
	cli := fake.NewSimpleClientset()
	agents := &fakeVolumeAgents{nodes: []string{"n2", "n1"}}
	v := NewVolumes(cli, "", "warren-shared", corev1.ReadWriteMany, "", agents, nil)
	if err := v.CreateClaim(ctx, "va", 8); err != nil {
		t.Fatal(err)
	}
	c, _ := cli.CoreV1().PersistentVolumeClaims(DefaultNamespace).Get(ctx, "warren-va", metav1.GetOptions{})
	if len(c.Spec.AccessModes) != 1 || c.Spec.AccessModes[0] != corev1.ReadWriteMany {
		t.Errorf("access modes %v, want ReadWriteMany", c.Spec.AccessModes)
	}
	// As the provisioner makes it: a directory of the shared filesystem, on no node in particular.
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"}, Spec: corev1.PersistentVolumeSpec{
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/warren/shared/fs/pvc-1"}},
	}}
	if _, err := cli.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Spec.VolumeName = "pvc-1"
	if _, err := cli.CoreV1().PersistentVolumeClaims(DefaultNamespace).Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	loc, err := v.locate(ctx, "va")
	if want := (location{c.Annotations[annotationSelectedNode], "/v1/shared-volumes/", "pvc-1"}); err != nil || loc != want || loc.node == "" {
		t.Errorf("located at %+v, %v; want %+v", loc, err, want)
	}
	agents.nodes = []string{"n3"} // the claim's node has no agent now: another serves it
	if loc, err := v.locate(ctx, "va"); err != nil || loc.node != "n3" {
		t.Errorf("located at %+v, %v; want n3's agent", loc, err)
	}
}

func TestAccessModeTakesOnlyWhatTheClaimsMayBe(t *testing.T) {
	for _, s := range []string{"", "ReadWriteOnce", "ReadWriteMany"} {
		if _, err := AccessMode(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"ReadOnlyMany", "ReadWriteOncePod", "rwx"} {
		if _, err := AccessMode(s); sandbox.KindOf(err) != sandbox.KindInvalid {
			t.Errorf("%q: %v, want invalid", s, err)
		}
	}
}

func TestVolumeLocationRefusesOtherVolumes(t *testing.T) {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "csi"}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "x"}},
	}}
	if _, _, err := volumeLocation(pv); sandbox.KindOf(err) != sandbox.KindUnavailable {
		t.Errorf("a CSI volume: %v", err)
	}
	pv.Spec.CSI, pv.Spec.Local = nil, &corev1.LocalVolumeSource{Path: "/x/pvc-2"}
	if _, _, err := volumeLocation(pv); sandbox.KindOf(err) != sandbox.KindUnavailable {
		t.Errorf("no node affinity: %v", err)
	}
}

func TestAnUnschedulablePodOfAVolumeSaysItsNodeIsFull(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "volume-0", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "warren-va"}}}}}}
	if h := claimHint(p); h != "" {
		t.Errorf("a pod still scheduling: %q", h)
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had volume node affinity conflict."}}
	if h := claimHint(p); !strings.Contains(h, "warren-va") || !strings.Contains(h, "that node has no room") {
		t.Errorf("hint %q", h)
	}
}
