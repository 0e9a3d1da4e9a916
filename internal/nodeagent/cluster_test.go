package nodeagent

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/errdefs"
	digest "github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/warrenhq/warren/internal/sandbox"
)

// cluster is the test cluster as test/kube/node-images.sh hands it over:
// the node agents running in namespace ns, each node's containerd.
type cluster struct {
	t       *testing.T
	kubectl string
	ns      string
	work    string
	agents  map[string]string // node name → the node agent's address
	nodes   []string
	client  *Client
}

// TestImagesOnCluster drives the image API of the node agents of the real
// cluster over HTTP, end to end: a `docker save` imported into node 1 and
// run by pods with imagePullPolicy Never, a file written in a runc pod and
// in a gVisor pod committed (frozen) and read back from new pods of the
// commits, an
// export of node 1 imported into node 2 (and into Docker) and run there,
// and the removals, after which the images' content and snapshots are
// gone from both nodes. test/kube/node-images.sh runs it (./test.sh's
// Kubernetes part); without it, it has nothing to run on.
func TestImagesOnCluster(t *testing.T) {
	if os.Getenv("WARREN_NODE_IMAGES_TEST") != "1" {
		t.Skip("skipping: runs on the test cluster through test/kube/node-images.sh")
	}
	c := newCluster(t)
	ctx := t.Context()
	n1, n2 := c.nodes[0], c.nodes[1]
	a1, a2 := c.agents[n1], c.agents[n2]

	// An image of the test's own, as small as can be: a static busybox.
	suffix := randHex(t, 4)
	repo := "nodeimg-test/t" + suffix
	short := repo + ":v1"
	full := "docker.io/" + short
	dockerID := buildTestImage(t, short)

	saved := dockerSave(t, short)
	imgs, err := c.client.ImportImage(ctx, a1, bytes.NewReader(saved))
	if err != nil {
		t.Fatal(err)
	}
	c.removeAtEnd(a1, full)
	if len(imgs) != 1 || imgs[0].Name != full || imgs[0].ID != dockerID || imgs[0].Labels["dev.warren.test"] != "base" || imgs[0].Size <= 0 {
		t.Fatalf("import: %+v, want %s with Docker's ID %s", imgs, full, dockerID)
	}
	if got, err := c.client.Image(ctx, a1, short); err != nil || got.ID != dockerID {
		t.Errorf("Image(%s) on %s: %+v, %v", short, n1, got, err)
	}
	if _, err := c.client.Image(ctx, a2, short); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("Image on %s, which has not got it: %v", n2, err)
	}
	// What is not an image archive changes nothing.
	if _, err := c.client.ImportImage(ctx, a1, strings.NewReader("not a tar")); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("importing what is not a tar: %v", err)
	}
	if _, err := c.client.ImportImage(ctx, a1, bytes.NewReader(tarOf(t, "etc/hostname", "x"))); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("importing a tar of no image: %v", err)
	}
	if _, err := c.client.Commit(ctx, a1, "11111111-2222-4333-8444-555555555555", "main", repo+":none", nil); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("commit of a pod the node has not: %v", err)
	}
	list, err := c.client.Images(ctx, a1)
	if err != nil || !hasImage(list, full, dockerID) {
		t.Errorf("Images on %s: %v, %v", n1, list, err)
	}
	for _, img := range list {
		if !isNormalName(img.Name) {
			t.Errorf("Images lists %q, not a name", img.Name)
		}
	}

	for _, rt := range []string{"runc", "gvisor"} {
		t.Run(rt, func(t *testing.T) {
			pod := c.runPod(n1, "nodeimg-"+rt+"-"+suffix, short, rt)
			c.exec(pod, "echo written-under-"+rt+" >/committed.txt && rm /etc/marker")
			// Committed frozen, as a pause does, and left frozen.
			ref, podUID := repo+":"+rt, c.uid(pod)
			if err := c.client.Freeze(ctx, a1, podUID); err != nil {
				t.Fatal(err)
			}
			img, err := c.client.Commit(ctx, a1, podUID, "main", ref, map[string]string{"dev.warren.committed": rt})
			if err != nil {
				t.Fatal(err)
			}
			if frozen, err := c.client.Frozen(ctx, a1, podUID); err != nil || !frozen {
				t.Errorf("after the commit, frozen: %v, %v", frozen, err)
			}
			if err := c.client.Thaw(ctx, a1, podUID); err != nil {
				t.Fatal(err)
			}
			c.removeAtEnd(a1, "docker.io/"+ref)
			if img.Name != "docker.io/"+ref || img.ID == dockerID || !strings.HasPrefix(img.ID, "sha256:") ||
				img.Labels["dev.warren.committed"] != rt || img.Labels["dev.warren.test"] != "base" {
				t.Fatalf("commit: %+v", img)
			}
			// The pod goes on as it was.
			if got := c.exec(pod, "cat /committed.txt"); got != "written-under-"+rt {
				t.Errorf("the committed pod reads %q", got)
			}
			again := c.runPod(n1, "nodeimg-"+rt+"-again-"+suffix, ref, rt)
			if got := c.exec(again, "cat /committed.txt; ls /etc/marker 2>&1 || true"); !strings.HasPrefix(got, "written-under-"+rt+"\n") || !strings.Contains(got, "No such file") {
				t.Errorf("a pod of the commit reads %q, want the file written and /etc/marker gone", got)
			}
		})
	}

	// Node 1's commit, exported, onto node 2.
	committed := "docker.io/" + repo + ":runc"
	want, err := c.client.Image(ctx, a1, committed)
	if err != nil {
		t.Fatal(err)
	}
	export := c.export(a1, committed)
	imgs, err = c.client.ImportImage(ctx, a2, bytes.NewReader(export))
	if err != nil {
		t.Fatal(err)
	}
	c.removeAtEnd(a2, committed)
	if len(imgs) != 1 || imgs[0].Name != committed || imgs[0].ID != want.ID || imgs[0].Labels["dev.warren.committed"] != "runc" {
		t.Fatalf("import of the export on %s: %+v, want %+v", n2, imgs, want)
	}
	on2 := c.runPod(n2, "nodeimg-node2-"+suffix, committed, "runc")
	if got := c.exec(on2, "cat /committed.txt"); got != "written-under-runc" {
		t.Errorf("the commit imported into %s reads %q", n2, got)
	}

	// Docker takes the export as well, with the same ID.
	load := exec.Command("docker", "load")
	load.Stdin = bytes.NewReader(export)
	if out, err := load.CombinedOutput(); err != nil {
		t.Fatalf("docker load of the export: %v: %s", err, out)
	}
	defer exec.Command("docker", "rmi", repo+":runc").Run()
	if id := dockerImageID(t, repo+":runc"); id != want.ID {
		t.Errorf("docker load: ID %s, the node's %s", id, want.ID)
	}

	// Removal: the pods go first (their containers hold the layers), then
	// the images, and with the last of them everything they had.
	blobs, chains := archiveContent(t, export)
	c.deletePods()
	if err := c.client.RemoveImage(ctx, a2, committed); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.Image(ctx, a2, committed); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("Image after RemoveImage: %v", err)
	}
	if err := c.client.RemoveImage(ctx, a2, committed); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("a second RemoveImage: %v", err)
	}
	c.gone(n2, blobs, chains)
	for _, ref := range []string{full, repo + ":runc", repo + ":gvisor"} {
		if err := c.client.RemoveImage(ctx, a1, ref); err != nil {
			t.Fatal(err)
		}
	}
	c.gone(n1, blobs, chains)
	if list, err := c.client.Images(ctx, a1); err != nil || hasImage(list, full, dockerID) {
		t.Errorf("Images after the removals: %v, %v", list, err)
	}
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{
		t: t, kubectl: os.Getenv("WARREN_E2E_KUBECTL"), ns: os.Getenv("WARREN_NODE_IMAGES_NAMESPACE"),
		work: os.Getenv("WARREN_KUBE_WORK"), agents: map[string]string{},
		client: NewClient(os.Getenv("WARREN_NODE_TOKEN")),
	}
	if c.kubectl == "" || c.ns == "" || c.work == "" {
		t.Fatal("WARREN_E2E_KUBECTL, WARREN_NODE_IMAGES_NAMESPACE and WARREN_KUBE_WORK are needed: run test/kube/node-images.sh")
	}
	out := c.k("get", "pods", "-l", "app.kubernetes.io/name=warren-node", "-o",
		`jsonpath={range .items[*]}{.spec.nodeName} {.status.podIP}{"\n"}{end}`)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		node, ip, _ := strings.Cut(line, " ")
		if ip == "" {
			continue
		}
		c.agents[node] = ip + ":" + strconv.Itoa(Port)
		c.nodes = append(c.nodes, node)
	}
	if len(c.nodes) < 2 {
		t.Fatalf("node agents on %v: the test needs two nodes", c.nodes)
	}
	if c.nodes[0] > c.nodes[1] {
		c.nodes[0], c.nodes[1] = c.nodes[1], c.nodes[0]
	}
	t.Cleanup(c.deletePods)
	return c
}

// k runs kubectl in the test's namespace and returns its output.
func (c *cluster) k(args ...string) string {
	c.t.Helper()
	out, err := c.kubectlIn(nil, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

func (c *cluster) kubectlIn(stdin io.Reader, args ...string) (string, error) {
	cmd := exec.Command(c.kubectl, append([]string{"-n", c.ns}, args...)...)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// runPod starts a pod of image on node under runtime (runc or gvisor),
// pulling nothing, and waits until it runs.
func (c *cluster) runPod(node, name, image, runtime string) string {
	c.t.Helper()
	spec := map[string]any{
		"nodeName":                      node,
		"automountServiceAccountToken":  false,
		"enableServiceLinks":            false,
		"terminationGracePeriodSeconds": 0,
		"restartPolicy":                 "Never",
		"containers": []map[string]any{{
			"name": "main", "image": image, "imagePullPolicy": "Never",
			"command": []string{"/bin/busybox", "sleep", "3600"},
		}},
	}
	if runtime == "gvisor" {
		spec["runtimeClassName"] = "gvisor"
	}
	pod, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "labels": map[string]string{"app": "nodeimg-test"}},
		"spec":     spec,
	})
	if _, err := c.kubectlIn(bytes.NewReader(pod), "apply", "-f", "-"); err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.kubectlIn(nil, "wait", "--for=condition=Ready", "--timeout=120s", "pod/"+name); err != nil {
		desc, _ := c.kubectlIn(nil, "describe", "pod", name)
		c.t.Fatalf("pod %s of %s on %s: %v\n%s", name, image, node, err, desc)
	}
	return name
}

func (c *cluster) uid(pod string) string {
	return c.k("get", "pod", pod, "-o", "jsonpath={.metadata.uid}")
}

// exec runs a shell command in the pod and returns its output, trimmed.
func (c *cluster) exec(pod, script string) string {
	c.t.Helper()
	return strings.TrimSpace(c.k("exec", pod, "--", "/bin/busybox", "sh", "-c", script))
}

func (c *cluster) deletePods() {
	_, _ = c.kubectlIn(nil, "delete", "pods", "-l", "app=nodeimg-test", "--wait=true", "--timeout=90s", "--ignore-not-found")
}

// removeAtEnd removes the image from a node when the test ends, whatever
// happened.
func (c *cluster) removeAtEnd(agent, ref string) {
	c.t.Cleanup(func() {
		c.deletePods()
		err := c.client.RemoveImage(context.Background(), agent, ref)
		if err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
			c.t.Errorf("cleanup: removing %s from %s: %v", ref, agent, err)
		}
	})
}

func (c *cluster) export(agent, ref string) []byte {
	c.t.Helper()
	r, err := c.client.ExportImage(c.t.Context(), agent, ref)
	if err != nil {
		c.t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

// gone checks that node's containerd keeps none of blobs and chains (once
// the containers of the test's deleted pods, which hold their layers, are
// gone too: the kubelet removes them in its own time).
func (c *cluster) gone(node string, blobs []digest.Digest, chains []string) {
	c.t.Helper()
	i := strings.LastIndex(node, "node")
	sock := filepath.Join(c.work, node[i:], "containerd.sock")
	cd, err := containerd.New(sock, containerd.WithDefaultNamespace(CRINamespace))
	if err != nil {
		c.t.Fatal(err)
	}
	defer cd.Close()
	ctx := c.t.Context()
	var left []string
	for deadline := time.Now().Add(3 * time.Minute); ; {
		left = left[:0]
		for _, b := range blobs {
			if _, err := cd.ContentStore().Info(ctx, b); !errdefs.IsNotFound(err) {
				left = append(left, "content "+b.String())
			}
		}
		for _, ch := range chains {
			if _, err := cd.SnapshotService("overlayfs").Stat(ctx, ch); !errdefs.IsNotFound(err) {
				left = append(left, "snapshot "+ch)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		// What a container held is collected with the next removal after
		// the kubelet's of the container: a lease's, synchronous.
		time.Sleep(2 * time.Second)
		if l, err := cd.LeasesService().Create(ctx, leases.WithRandomID()); err == nil {
			_ = cd.LeasesService().Delete(ctx, l, leases.SynchronousDelete)
		}
	}
	if len(left) > 0 {
		c.t.Errorf("%s still holds %v", node, left)
	}
}

// archiveContent lists the blobs of an exported tar and the chain IDs of
// its image's layers.
func archiveContent(t *testing.T, b []byte) ([]digest.Digest, []string) {
	tr := tar.NewReader(bytes.NewReader(b))
	var blobs []digest.Digest
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := strings.CutPrefix(h.Name, "blobs/sha256/"); ok && d != "" {
			blobs = append(blobs, digest.NewDigestFromEncoded(digest.SHA256, d))
			files[h.Name], _ = io.ReadAll(tr)
		}
	}
	var cfg ocispec.Image
	for _, f := range files {
		var probe ocispec.Image
		if json.Unmarshal(f, &probe) == nil && len(probe.RootFS.DiffIDs) > 0 {
			cfg = probe
		}
	}
	if len(cfg.RootFS.DiffIDs) < 2 {
		t.Fatalf("the export holds no config of a commit (%d blobs)", len(blobs))
	}
	var chains []string
	for _, ch := range identity.ChainIDs(cfg.RootFS.DiffIDs) {
		chains = append(chains, ch.String())
	}
	return blobs, chains
}

// tarOf is a tar of one file.
func tarOf(t *testing.T, name, content string) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	io.WriteString(tw, content)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func hasImage(list []Image, name, id string) bool {
	for _, img := range list {
		if img.Name == name && img.ID == id {
			return true
		}
	}
	return false
}

func randHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// buildTestImage builds name in Docker: a static busybox, a label and a
// file to remove; it returns its ID and removes it at the end.
func buildTestImage(t *testing.T, name string) string {
	dir := t.TempDir()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("the test image needs a static busybox (Debian's busybox-static, which scripts/kube.sh up installs): %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "marker"), []byte("in the image\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dockerfile := "FROM scratch\nCOPY busybox /bin/busybox\nCOPY marker /etc/marker\nLABEL dev.warren.test=base\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("docker", "build", "-q", "-t", name, dir).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", name).Run() })
	return dockerImageID(t, name)
}

func dockerImageID(t *testing.T, name string) string {
	out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", name).Output()
	if err != nil {
		t.Fatalf("docker image inspect %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

func dockerSave(t *testing.T, name string) []byte {
	out, err := exec.Command("docker", "save", name).Output()
	if err != nil {
		t.Fatalf("docker save %s: %v", name, err)
	}
	return out
}
