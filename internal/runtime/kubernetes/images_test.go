package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warrenhq/warren/internal/sandbox"
)

// runtime is a Runtime on the cluster, without a manager; with, when
// given, changes its Config.
func (c *cluster) runtime(t *testing.T, with ...func(*Config)) *Runtime {
	t.Helper()
	cfg := Config{Client: c.cli, Images: c.builder, Source: c.builder, Nodes: c.nodes, Instance: "e2e", StartTimeout: 10 * time.Second}
	for _, f := range with {
		f(&cfg)
	}
	rt, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func (c *cluster) create(t *testing.T, rt *Runtime, id, image string) *corev1.Pod {
	t.Helper()
	s := spec(id)
	s.Image, s.PidsLimit = image, 0
	if _, err := rt.Create(t.Context(), s); err != nil {
		t.Fatalf("create %s of %s: %v", id, image, err)
	}
	p, _ := c.pod(t, id)
	return p
}

// createFails creates sandbox id of image, which must fail and leave no
// pod, and returns the error.
func (c *cluster) createFails(t *testing.T, rt *Runtime, id, image string) error {
	t.Helper()
	s := spec(id)
	s.Image, s.PidsLimit = image, 0
	_, err := rt.Create(t.Context(), s)
	if err == nil {
		t.Fatalf("create %s of %s succeeded", id, image)
	}
	if _, ok := c.pod(t, id); ok {
		t.Errorf("a failed create of %s left its pod", id)
	}
	return err
}

func TestCreatesAtOnceImportTheImageOncePerNode(t *testing.T) {
	c := newCluster(t)
	rt := c.runtime(t)
	c.builder.set("warren-template/t1:b1", "sha256:t1")
	c.nodes.gate = make(chan struct{})
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() { c.create(t, rt, fmt.Sprintf("i%d", i), "warren-template/t1:b1") })
	}
	time.Sleep(100 * time.Millisecond) // all of them are waiting for the imports
	close(c.nodes.gate)
	wg.Wait()
	got := c.nodes.importsDone()
	slices.Sort(got)
	want := []string{"node-1 docker.io/warren-template/t1:b1 sha256:t1", "node-2 docker.io/warren-template/t1:b1 sha256:t1"}
	if !slices.Equal(got, want) {
		t.Errorf("imports %v, want %v", got, want)
	}
	p, _ := c.pod(t, "i0")
	if !slices.Equal(pinnedTo(p), []string{"node-1", "node-2"}) || p.Annotations[annotationImageID] != "sha256:t1" {
		t.Errorf("pod on %v of image %s", pinnedTo(p), p.Annotations[annotationImageID])
	}
	c.create(t, rt, "iagain", "warren-template/t1:b1")
	if n := len(c.nodes.importsDone()); n != 2 {
		t.Errorf("a create of an image the nodes have imported it again: %d imports", n)
	}
}

func TestARebuiltImageIsImportedAgain(t *testing.T) {
	c := newCluster(t)
	rt := c.runtime(t)
	c.create(t, rt, "i1", "warren/base")
	rebuild(c, rt, "warren/base", "sha256:rebuilt")
	p := c.create(t, rt, "i2", "warren/base")
	if n := len(c.nodes.importsDone()); n != 4 {
		t.Errorf("%d imports, want 2 per build: %v", n, c.nodes.importsDone())
	}
	for _, n := range []string{"node-1", "node-2"} {
		if img, _ := c.nodes.has(n, "warren/base"); img.ID != "sha256:rebuilt" {
			t.Errorf("%s has warren/base %s", n, img.ID)
		}
	}
	if p.Annotations[annotationImageID] != "sha256:rebuilt" {
		t.Errorf("pod of image %s", p.Annotations[annotationImageID])
	}
}

// rebuild gives the builder's image ref the ID id, as a build through the
// server does: Distribute, its last step, forgets the builder's answer.
func rebuild(c *cluster, rt *Runtime, ref, id string) {
	c.builder.set(ref, id)
	rt.forgetImageID(ref)
}

// The builder's answer to an image's ID is reused for imageIDTTL: an image
// rebuilt behind the server's back is seen once it is older; one built
// through the server, or removed, at once.
func TestTheBuildersImageIDIsReused(t *testing.T) {
	c := newCluster(t)
	rt := c.runtime(t)
	ctx := t.Context()
	id := func() string {
		t.Helper()
		got, err := rt.ImageID(ctx, "warren/base")
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := id(); got != "sha256:abc" {
		t.Fatalf("ID %s", got)
	}
	c.builder.set("warren/base", "sha256:behind")
	if got := id(); got != "sha256:abc" {
		t.Errorf("ID just after a rebuild behind the server's back = %s, want the answer of a moment ago", got)
	}
	rt.img.mu.Lock()
	e := rt.img.ids[imageName("warren/base")]
	e.at = e.at.Add(-imageIDTTL)
	rt.img.ids[imageName("warren/base")] = e
	rt.img.mu.Unlock()
	if got := id(); got != "sha256:behind" {
		t.Errorf("ID once the answer is %v old = %s, want sha256:behind", imageIDTTL, got)
	}
	c.builder.set("warren/base", "sha256:built")
	rt.Distribute(ctx, "warren/base", func(string) {})
	if got := id(); got != "sha256:built" {
		t.Errorf("ID after a build through the server = %s, want sha256:built", got)
	}
	if err := rt.RemoveImage(ctx, "warren/base"); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.ImageID(ctx, "warren/base"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("ID after the image's removal: %v, want not found", err)
	}
}

// After a restart the runtime asks the nodes what they have: warren/base,
// loaded there already, is not imported again.
func TestAnImageTheNodesHaveIsNotImported(t *testing.T) {
	c := newCluster(t)
	c.nodes.put("node-1", "warren/base", "sha256:abc")
	c.nodes.put("node-2", "warren/base", "sha256:abc")
	c.create(t, c.runtime(t), "i1", "warren/base")
	if got := c.nodes.importsDone(); len(got) != 0 {
		t.Errorf("imports %v", got)
	}
}

func TestANodeThatCannotImportIsAvoided(t *testing.T) {
	c := newCluster(t)
	c.nodes.failImport["node-2"] = true
	rt := c.runtime(t)
	p := c.create(t, rt, "i1", "warren/base")
	if !slices.Equal(pinnedTo(p), []string{"node-1"}) || p.Spec.NodeName != "node-1" {
		t.Errorf("pod pinned to %v, on %s", pinnedTo(p), p.Spec.NodeName)
	}
	c.nodes.failImport["node-1"] = true
	rebuild(c, rt, "warren/base", "sha256:rebuilt")
	if err := c.createFails(t, rt, "i2", "warren/base"); sandbox.KindOf(err) != sandbox.KindUnavailable {
		t.Errorf("a create no node can have the image of: %v, want unavailable", err)
	}
}

func TestWithARegistryNothingIsImported(t *testing.T) {
	c := newCluster(t)
	rt := c.runtime(t, func(c *Config) { c.PullPolicy = "IfNotPresent" })
	p := c.create(t, rt, "i1", "warren/base")
	if got := c.nodes.importsDone(); len(got) != 0 || pinnedTo(p) != nil {
		t.Errorf("imports %v, pinned to %v", got, pinnedTo(p))
	}
}

// With Config.Registry, the builder's images are pushed there once per
// build however many creates ask, pods pull them by digest from any node,
// and nothing is imported into the nodes.
func TestWithARegistryPodsPullByDigest(t *testing.T) {
	c := newCluster(t)
	rt := c.runtime(t, func(c *Config) { c.Registry = "127.0.0.1:5000/w" })
	c.builder.set("warren-template/t1:b1", "sha256:t1")
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { c.create(t, rt, fmt.Sprintf("i%d", i), "warren-template/t1:b1") })
	}
	wg.Wait()
	if got, want := c.builder.pushed(), []string{"127.0.0.1:5000/w/warren-template/t1:b1 sha256:t1"}; !slices.Equal(got, want) {
		t.Errorf("pushes %v, want %v", got, want)
	}
	p, _ := c.pod(t, "i0")
	ct := p.Spec.Containers[0]
	if ct.Image != "127.0.0.1:5000/w/warren-template/t1@sha256:mt1" || ct.ImagePullPolicy != corev1.PullIfNotPresent ||
		pinnedTo(p) != nil || p.Annotations[annotationImageID] != "sha256:t1" {
		t.Errorf("pod runs %s (%s), pinned to %v, image ID %s", ct.Image, ct.ImagePullPolicy, pinnedTo(p), p.Annotations[annotationImageID])
	}
	if p.Spec.InitContainers[0].ImagePullPolicy != "Never" {
		t.Errorf("the agent's image is pulled %s, want as --image-pull-policy says", p.Spec.InitContainers[0].ImagePullPolicy)
	}
	if got := c.nodes.importsDone(); len(got) != 0 {
		t.Errorf("imports %v", got)
	}

	// A rebuild is pushed, at the end of its build.
	c.builder.set("warren-template/t1:b1", "sha256:t2")
	var lines []string
	rt.Distribute(t.Context(), "warren-template/t1:b1", func(l string) { lines = append(lines, l) })
	if len(lines) != 2 || !strings.Contains(lines[1], "@sha256:mt2") || len(c.builder.pushed()) != 2 {
		t.Errorf("the rebuild's push said %q, pushes %v", lines, c.builder.pushed())
	}
	if p := c.create(t, rt, "i5", "warren-template/t1:b1"); p.Spec.Containers[0].Image != "127.0.0.1:5000/w/warren-template/t1@sha256:mt2" || len(c.builder.pushed()) != 2 {
		t.Errorf("a pod of the rebuild runs %s after %v", p.Spec.Containers[0].Image, c.builder.pushed())
	}

	// A push that fails fails the create, and leaves no pod.
	c.builder.set("warren-template/t3:b1", "sha256:t3")
	c.builder.pushFails = sandbox.Errorf(sandbox.KindUnavailable, "connection refused")
	if err := c.createFails(t, rt, "ifail", "warren-template/t3:b1"); sandbox.KindOf(err) != sandbox.KindUnavailable || !strings.Contains(err.Error(), "127.0.0.1:5000/w") {
		t.Errorf("create with the registry down: %v", err)
	}
}

// With Config.Registry, a snapshot is pushed once copied into the builder:
// its sandboxes start pinned to its node until then, and pull it by
// digest on any node afterwards.
func TestWithARegistryASnapshotIsPushed(t *testing.T) {
	c := newCluster(t)
	rt := c.runtime(t, func(c *Config) { c.Registry = "127.0.0.1:5000" })
	c.create(t, rt, "isrc", "warren/base")
	ref := sandbox.SnapshotRepo + ":s1"
	if _, err := rt.Commit(t.Context(), PodName("isrc"), ref); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !slices.ContainsFunc(c.builder.pushed(), func(p string) bool { return strings.HasPrefix(p, "127.0.0.1:5000/warren/snapshot:s1 ") }) {
		if time.Now().After(deadline) {
			t.Fatalf("the snapshot was not pushed: %v", c.builder.pushed())
		}
		time.Sleep(10 * time.Millisecond)
	}
	p := c.create(t, rt, "ifrom", ref)
	if ct := p.Spec.Containers[0]; !strings.Contains(ct.Image, "@sha256:") || pinnedTo(p) != nil {
		t.Errorf("a pod of the pushed snapshot runs %s, pinned to %v", ct.Image, pinnedTo(p))
	}
	if err := rt.RemoveImage(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	if err := c.createFails(t, rt, "igone", ref); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("a create of the removed snapshot: %v, want not found", err)
	}
}

// A snapshot is committed on its sandbox's node: the image is found
// there, a sandbox of it starts there at once, and it is copied to the
// other node for the next ones.
func TestACommittedImageIsFoundPinnedAndSpread(t *testing.T) {
	c := newCluster(t)
	rt := c.runtime(t)
	src := c.create(t, rt, "isrc", "warren/base")
	node := src.Spec.NodeName
	other := map[string]string{"node-1": "node-2", "node-2": "node-1"}[node]
	ref := sandbox.SnapshotRepo + ":s1"
	if got, err := rt.Commit(t.Context(), PodName("isrc"), ref); err != nil || got != ref {
		t.Fatalf("commit: %q, %v", got, err)
	}
	img, err := rt.InspectImage(t.Context(), ref)
	if err != nil || !img.Warrens() || img.Labels[sandbox.LabelTeam] != "t1" {
		t.Fatalf("inspect the snapshot: %+v, %v", img, err)
	}
	if ok, err := rt.ImageExists(t.Context(), ref); !ok || err != nil {
		t.Errorf("exists: %v, %v", ok, err)
	}
	if id, err := rt.ImageID(t.Context(), ref); id != img.ID || err != nil {
		t.Errorf("ID %s, %v; want %s", id, err, img.ID)
	}
	if _, err := rt.ImageID(t.Context(), sandbox.SnapshotRepo+":nope"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("ID of no image: %v", err)
	}

	if err := rt.BuilderCopies(t.Context()); err != nil {
		t.Fatal(err)
	}
	if id, _ := c.builder.id(ref); id != img.ID {
		t.Fatalf("the snapshot was not copied into the builder, for templates built on it: %q", id)
	}
	deadline := time.Now().Add(5 * time.Second)

	p := c.create(t, rt, "ifrom", ref)
	if !slices.Equal(pinnedTo(p), []string{node}) || p.Spec.NodeName != node || p.Annotations[annotationImageID] != img.ID {
		t.Errorf("pod of the snapshot pinned to %v, on %s; image %s", pinnedTo(p), p.Spec.NodeName, p.Annotations[annotationImageID])
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		if got, ok := c.nodes.has(other, ref); ok && got.ID == img.ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the snapshot was not copied to %s", other)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p := c.create(t, rt, "ilater", ref); !slices.Equal(pinnedTo(p), []string{"node-1", "node-2"}) {
		t.Errorf("once copied, a pod of the snapshot is pinned to %v", pinnedTo(p))
	}

	if err := rt.RemoveImage(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node-1", "node-2"} {
		if _, ok := c.nodes.has(n, ref); ok {
			t.Errorf("the removed snapshot is left on %s", n)
		}
	}
	if _, ok := c.builder.id(ref); ok {
		t.Error("the removed snapshot is left in the builder")
	}
	if err := rt.RemoveImage(t.Context(), ref); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("removing it again: %v, want not found", err)
	}
}

func TestRemoveImageRemovesItFromTheBuilderAndEveryNode(t *testing.T) {
	c := newCluster(t)
	rt := c.runtime(t)
	c.builder.set("warren-template/t1:b1", "sha256:t1")
	c.create(t, rt, "i1", "warren-template/t1:b1")
	if err := rt.RemoveImage(t.Context(), "warren-template/t1:b1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.builder.id("warren-template/t1:b1"); ok {
		t.Error("left in the builder")
	}
	for _, n := range []string{"node-1", "node-2"} {
		if _, ok := c.nodes.has(n, "warren-template/t1:b1"); ok {
			t.Errorf("left on %s", n)
		}
	}
}

// The collection removes from the nodes the template images the builder
// no longer has, unless a pod of the node runs one; other images stay.
func TestCollectionRemovesTemplateImagesNoLongerBuilt(t *testing.T) {
	c := newCluster(t)
	rt := c.runtime(t)
	c.builder.set("warren-template/used:b1", "sha256:used")
	p := c.create(t, rt, "i1", "warren-template/used:b1")
	if err := c.builder.RemoveImage(t.Context(), "warren-template/used:b1"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node-1", "node-2"} {
		c.nodes.put(n, "warren-template/gone:b1", "sha256:gone")
		c.nodes.put(n, "warren-template/kept:b2", "sha256:kept")
		c.nodes.put(n, sandbox.SnapshotRepo+":s1", "sha256:snap")
	}
	c.builder.set("warren-template/kept:b2", "sha256:kept")
	waitSynced(t, rt, "i1")
	rt.collectImages(t.Context())
	for _, n := range []string{"node-1", "node-2"} {
		for ref, want := range map[string]bool{"warren-template/gone:b1": false, "warren-template/kept:b2": true,
			sandbox.SnapshotRepo + ":s1": true, "warren/base": false, "warren-template/used:b1": n == p.Spec.NodeName} {
			if _, ok := c.nodes.has(n, ref); ok != want && ref != "warren/base" {
				t.Errorf("%s on %s: %v, want %v", ref, n, ok, want)
			}
		}
	}
}

// waitSynced waits until the runtime's informer has the named pod.
func waitSynced(t *testing.T, rt *Runtime, id string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if p, err := rt.pods.Get(PodName(id)); err == nil && p.Spec.NodeName != "" {
			return
		}
	}
	t.Fatalf("the informer has no pod of %s", id)
}

func TestStopRecordsTheSandboxAndStartPinsItToItsNode(t *testing.T) {
	c := newCluster(t)
	rt := c.runtime(t)
	p := c.create(t, rt, "i1", "warren/base")
	id := PodName("i1")
	if err := rt.Stop(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.pod(t, "i1"); ok {
		t.Error("the stopped sandbox's pod is left")
	}
	if err := rt.Stop(t.Context(), id); err != nil {
		t.Errorf("stopping it again: %v", err)
	}
	if _, err := rt.Commit(t.Context(), id, sandbox.SnapshotRepo+":s1"); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("a snapshot of the stopped sandbox: %v, want a conflict", err)
	}
	cm, err := c.cli.CoreV1().ConfigMaps(DefaultNamespace).Get(t.Context(), id, metav1.GetOptions{})
	if err != nil || cm.Labels[sandbox.LabelSandbox] != "i1" || cm.Data[recordNode] != p.Spec.NodeName {
		t.Fatalf("record %v, %v", cm, err)
	}
	ct, err := rt.Inspect(t.Context(), id)
	if err != nil || ct.Running || ct.SandboxID != "i1" || ct.AgentSecret != "s3cret" || ct.Labels[sandbox.LabelTeam] != "t1" {
		t.Fatalf("inspect the stopped sandbox: %+v, %v", ct, err)
	}
	list, err := rt.List(t.Context())
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].Running {
		t.Fatalf("list: %+v, %v", list, err)
	}

	ct, err = rt.Start(t.Context(), id)
	if err != nil || !ct.Running || ct.AgentSecret != "s3cret" {
		t.Fatalf("start: %+v, %v", ct, err)
	}
	p2, _ := c.pod(t, "i1")
	if p2.Spec.NodeName != p.Spec.NodeName || !slices.Equal(pinnedTo(p2), []string{p.Spec.NodeName}) ||
		sandboxImage(p2) != imageName(stoppedImage("i1")) || p2.Labels[sandbox.LabelTeam] != "t1" {
		t.Errorf("started pod on %s pinned to %v of %s, labels %v", p2.Spec.NodeName, pinnedTo(p2), sandboxImage(p2), p2.Labels)
	}
	if _, err := c.cli.CoreV1().ConfigMaps(DefaultNamespace).Get(t.Context(), id, metav1.GetOptions{}); err == nil {
		t.Error("the record is left once the sandbox runs again")
	}

	// Stopped again, then removed: pod, record and image go.
	if err := rt.Stop(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if err := rt.Remove(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.nodes.has(p.Spec.NodeName, stoppedImage("i1")); ok {
		t.Error("the stopped sandbox's image is left")
	}
	if _, err := rt.Inspect(t.Context(), id); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("inspect after remove: %v", err)
	}
	if err := rt.Remove(t.Context(), id); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("remove again: %v", err)
	}
}

func TestWithoutNodeAgentsStopIsUnavailable(t *testing.T) {
	c := newCluster(t)
	rt, err := New(Config{Client: c.cli, Images: c.builder, Instance: "e2e", StartTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	c.create(t, rt, "i1", "warren/base")
	if err := rt.Stop(t.Context(), PodName("i1")); sandbox.KindOf(err) != sandbox.KindUnavailable {
		t.Errorf("stop: %v, want unavailable", err)
	}
	if _, ok := c.pod(t, "i1"); !ok {
		t.Error("the pod was deleted")
	}
}

// A template build ends by bringing its image to the nodes: its first
// sandbox imports nothing.
func TestDistributeBringsABuiltImageToTheNodes(t *testing.T) {
	c := newCluster(t)
	rt := c.runtime(t)
	c.builder.set("warren-template/t1:b1", "sha256:t1")
	var lines []string
	rt.Distribute(t.Context(), "warren-template/t1:b1", func(l string) { lines = append(lines, l) })
	if n := len(c.nodes.importsDone()); n != 2 || len(lines) != 2 || !strings.Contains(lines[1], "node-1, node-2") {
		t.Fatalf("%d imports, said %q", n, lines)
	}
	c.create(t, rt, "i1", "warren-template/t1:b1")
	if n := len(c.nodes.importsDone()); n != 2 {
		t.Errorf("the first sandbox imported again: %d imports", n)
	}
	c.nodes.failImport["node-1"], c.nodes.failImport["node-2"] = true, true
	c.builder.set("warren-template/t1:b2", "sha256:t2")
	lines = nil
	rt.Distribute(t.Context(), "warren-template/t1:b2", func(l string) { lines = append(lines, l) })
	if len(lines) != 2 || !strings.Contains(lines[1], "disk full") {
		t.Errorf("a failed import said %q", lines)
	}
}

// A fork image removed while it is being copied to another node stops
// the copy instead of waiting for it to land, and is left on no node.
func TestRemovingAnImageBeingCopiedStopsTheCopy(t *testing.T) {
	c := newCluster(t)
	rt := c.runtime(t)
	c.create(t, rt, "isrc", "warren/base")
	ref := sandbox.ForkRepo + ":f1"
	if _, err := rt.Commit(t.Context(), PodName("isrc"), ref); err != nil {
		t.Fatal(err)
	}
	c.nodes.mu.Lock()
	c.nodes.gate = make(chan struct{}) // never opened: the copy to the other node waits at it
	c.nodes.mu.Unlock()
	defer close(c.nodes.gate)
	c.create(t, rt, "ifork", ref) // pinned where committed
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := rt.RemoveImage(ctx, ref); err != nil {
		t.Fatalf("removing an image whose copy is under way: %v", err)
	}
	for _, n := range []string{"node-1", "node-2"} {
		if _, ok := c.nodes.has(n, ref); ok {
			t.Errorf("the removed fork image is left on %s", n)
		}
	}
	if got := c.nodes.importsDone(); slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "f1") }) {
		t.Errorf("the stopped copy imported the image: %v", got)
	}
}
