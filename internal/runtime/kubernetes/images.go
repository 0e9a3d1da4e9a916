package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/nodeagent"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Images live in two places. Templates are built by the Docker engine
// beside the control plane (Config.Images, the builder); a pod runs an
// image from its node's containerd. With PullPolicy "Never" (no registry)
// the runtime brings the builder's images to the nodes itself: before a
// pod of an image is made, every node with a node agent gets it (`docker
// save` streamed to the node agent's import, all nodes at once, once per
// node and image ID however many creates ask), and the pod may only run
// on the nodes that have it. A rebuilt image has a new ID and is imported
// again, replacing the node's copy under that name.
//
// Images committed on a node (snapshots, forks, stopped sandboxes) exist
// on that node only, so every answer about an image is the builder's or,
// when it has none, the nodes'. A snapshot is also copied into the builder
// in the background, since templates may be built on it. A pod of a committed image is pinned to
// the nodes that have it, which it can start on at once, and the image is
// copied to the other nodes in the background (exported by its node's
// agent, imported by theirs), so that later pods of it may run anywhere:
// a create never waits for a copy, and a snapshot does not tie all its
// sandboxes to one node for long.
//
// The builder's image ID is what the pod is stamped with (the warm pool
// compares it to tell a rebuilt image): the node agent reports the same
// ID, the digest of the image's config.

// ImageSource is the builder's engine as a store of images: it streams
// one it has, with its name, as the tar `docker save` writes, and loads
// one from such a tar (runtime/docker's SaveImage and LoadImage).
type ImageSource interface {
	SaveImage(ctx context.Context, ref string) (io.ReadCloser, error)
	LoadImage(ctx context.Context, tar io.Reader) error
}

// ImagePusher is an ImageSource that pushes one of its images to a
// registry as target (a name with a tag) and returns its name there by
// digest (runtime/docker's PushImage): what Config.Registry needs.
type ImagePusher interface {
	PushImage(ctx context.Context, ref, target string) (string, error)
}

// Timings of the image cache.
const (
	// nodesTTL is how long the list of nodes with an agent is reused.
	nodesTTL = 10 * time.Second
	// imageIDTTL is how long the builder's answer to an image's ID is
	// reused (builderImageID).
	imageIDTTL = 5 * time.Second
	// importTimeout bounds one image's import into one node.
	importTimeout = 30 * time.Minute
	// gcInterval is how often images no template uses any more are
	// removed from the nodes (and gcDelay after start, once).
	gcInterval = 10 * time.Minute
	gcDelay    = time.Minute
)

// nodeImages is what the runtime knows of the nodes' images: each node's
// list, read from its agent the first time it is needed (so a restart
// finds what it imported and committed before) and kept up to date by the
// imports, commits and removals made through it.
type nodeImages struct {
	mu      sync.Mutex
	byNode  map[string]map[string]nodeagent.Image // node → normalized name → image
	imports map[string]*importFlight              // node, name and ID → the import under way
	// copies are the background copies of images under way (to other
	// nodes, into the builder), each channel closed when done.
	copies map[chan struct{}]copyOf
	// pushed names the builder's images pushed to Config.Registry by
	// digest: name and ID → the name pods run.
	pushed map[string]string
	// ids are the builder's latest answers to image IDs, by normalized
	// name (builderImageID).
	ids     map[string]builderID
	nodes   []string
	nodesAt time.Time
}

// builderID is an image's ID as the builder said it, and when.
type builderID struct {
	id string
	at time.Time
}

// copyOf is what a background copy copies, and how to stop it.
type copyOf struct {
	name      string // normalized
	toBuilder bool
	cancel    context.CancelFunc
}

// importFlight is one import of an image into a node, or one push of it
// to Config.Registry, which every caller asking for it waits on (fly).
type importFlight struct {
	name   string // normalized
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func newNodeImages() *nodeImages {
	return &nodeImages{byNode: map[string]map[string]nodeagent.Image{}, imports: map[string]*importFlight{},
		copies: map[chan struct{}]copyOf{}, pushed: map[string]string{}, ids: map[string]builderID{}}
}

// imageName is ref as containerd and the node agent name it:
// "warren/base" is "docker.io/warren/base:latest".
func imageName(ref string) string {
	if n, err := reference.ParseDockerRef(ref); err == nil {
		return n.String()
	}
	return ref
}

// agentNodes names the nodes with a node agent.
func (r *Runtime) agentNodes(ctx context.Context) ([]string, error) {
	c := r.img
	c.mu.Lock()
	if c.nodes != nil && time.Since(c.nodesAt) < nodesTTL {
		defer c.mu.Unlock()
		return slices.Clone(c.nodes), nil
	}
	c.mu.Unlock()
	nodes, err := r.cfg.Nodes.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	c.mu.Lock()
	c.nodes, c.nodesAt = nodes, time.Now()
	c.mu.Unlock()
	return slices.Clone(nodes), nil
}

// nodeImage returns node's image named ref, reading the node's list from
// its agent when not known yet.
func (r *Runtime) nodeImage(ctx context.Context, node, ref string) (nodeagent.Image, bool, error) {
	if err := r.loadNode(ctx, node); err != nil {
		return nodeagent.Image{}, false, err
	}
	c := r.img
	c.mu.Lock()
	defer c.mu.Unlock()
	img, ok := c.byNode[node][imageName(ref)]
	return img, ok, nil
}

// loadNode reads node's images from its agent unless they are known.
func (r *Runtime) loadNode(ctx context.Context, node string) error {
	c := r.img
	c.mu.Lock()
	_, loaded := c.byNode[node]
	c.mu.Unlock()
	if loaded {
		return nil
	}
	list, err := r.cfg.Nodes.Images(ctx, node)
	if err != nil {
		return err
	}
	m := make(map[string]nodeagent.Image, len(list))
	for _, i := range list {
		m[imageName(i.Name)] = i
	}
	c.mu.Lock()
	if _, ok := c.byNode[node]; !ok { // else filled meanwhile, and perhaps updated since: keep that
		c.byNode[node] = m
	}
	c.mu.Unlock()
	return nil
}

// noteImage records that node has img now.
func (r *Runtime) noteImage(node string, img nodeagent.Image) {
	c := r.img
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.byNode[node]; ok { // else the node's list, once read, has it
		m[imageName(img.Name)] = img
	}
}

// forgetImage records that node no longer has ref.
func (r *Runtime) forgetImage(node, ref string) {
	c := r.img
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byNode[node], imageName(ref))
}

// forgetNode drops what is known of node's images: the next question
// reads them from its agent again (a pod found an image missing there).
func (r *Runtime) forgetNode(node string) {
	c := r.img
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byNode, node)
}

// holders returns the nodes with an agent that have ref, and ref's image
// on the first of them.
func (r *Runtime) holders(ctx context.Context, ref string) ([]string, nodeagent.Image, error) {
	nodes, err := r.agentNodes(ctx)
	if err != nil {
		return nil, nodeagent.Image{}, err
	}
	var out []string
	var first nodeagent.Image
	var failed error
	for _, n := range nodes {
		img, ok, err := r.nodeImage(ctx, n, ref)
		switch {
		case err != nil:
			r.log.WarnContext(ctx, "cannot list a node's images", "node", n, "err", err)
			failed = cmp.Or(failed, err)
		case ok:
			if out == nil {
				first = img
			}
			out = append(out, n)
		}
	}
	if out == nil && failed != nil {
		return nil, first, failed
	}
	return out, first, nil
}

// onNodes returns ref's image as the nodes have it; KindNotFound when
// none has it.
func (r *Runtime) onNodes(ctx context.Context, ref string) (nodeagent.Image, error) {
	if r.cfg.Nodes == nil {
		return nodeagent.Image{}, sandbox.Errorf(sandbox.KindNotFound, "no image %s", ref)
	}
	hs, img, err := r.holders(ctx, ref)
	if err != nil {
		return img, err
	}
	if len(hs) == 0 {
		return img, sandbox.Errorf(sandbox.KindNotFound, "no image %s in the builder's Docker engine nor on any node", ref)
	}
	return img, nil
}

// ImageExists reports whether the builder's engine or a node has the
// image.
func (r *Runtime) ImageExists(ctx context.Context, ref string) (bool, error) {
	ok, err := r.cfg.Images.ImageExists(ctx, ref)
	if err != nil || ok || r.cfg.Nodes == nil {
		return ok, err
	}
	_, err = r.onNodes(ctx, ref)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return false, nil
	}
	return err == nil, err
}

// ImageID returns the ID of the image ref names: the builder's, or the
// nodes' for an image committed there.
func (r *Runtime) ImageID(ctx context.Context, ref string) (string, error) {
	id, err := r.builderImageID(ctx, ref)
	if sandbox.KindOf(err) != sandbox.KindNotFound {
		return id, err
	}
	img, err := r.onNodes(ctx, ref)
	return img.ID, err
}

// builderImageID is the builder's ImageID of ref, its answer reused for
// imageIDTTL. Every create asks for its image's ID (a pooled pod of a
// rebuilt image must not be claimed), and on this engine the builder's
// Docker engine is no part of a pod's start: a busy one (a build, a
// burst of another server's containers) held every create of a burst of
// 50 for seconds (p50 7.5 s, the engines side by side), waiting in turn
// for answers that had not changed. A build through this server
// (Distribute) and a removal (RemoveImage) forget the name's answer; an
// image rebuilt behind the server's back is seen within imageIDTTL. A
// missing image is not remembered: its build is seen at once.
func (r *Runtime) builderImageID(ctx context.Context, ref string) (string, error) {
	key := imageName(ref)
	r.img.mu.Lock()
	c, ok := r.img.ids[key]
	r.img.mu.Unlock()
	if ok && time.Since(c.at) < imageIDTTL {
		return c.id, nil
	}
	asked := time.Now()
	id, err := r.cfg.Images.ImageID(ctx, ref)
	r.img.mu.Lock()
	defer r.img.mu.Unlock()
	if err != nil {
		delete(r.img.ids, key)
	} else if r.img.ids[key].at.Before(asked) {
		r.img.ids[key] = builderID{id: id, at: asked}
	}
	return id, err
}

// forgetImageID drops the builder's answer to ref's ID, which a build or
// a removal changed.
func (r *Runtime) forgetImageID(ref string) {
	r.img.mu.Lock()
	defer r.img.mu.Unlock()
	delete(r.img.ids, imageName(ref))
}

// ImageLabels returns the labels of the image ref names.
func (r *Runtime) ImageLabels(ctx context.Context, ref string) (map[string]string, error) {
	l, err := r.cfg.Images.ImageLabels(ctx, ref)
	if sandbox.KindOf(err) != sandbox.KindNotFound {
		return l, err
	}
	img, err := r.onNodes(ctx, ref)
	return img.Labels, err
}

// InspectImage returns the image the builder's engine finds for ref, or
// the one a node has under that name (nodes are asked by name only).
func (r *Runtime) InspectImage(ctx context.Context, ref string) (sandbox.Image, error) {
	si, err := r.cfg.Images.InspectImage(ctx, ref)
	if sandbox.KindOf(err) != sandbox.KindNotFound {
		return si, err
	}
	img, err := r.onNodes(ctx, ref)
	if err != nil {
		return sandbox.Image{}, err
	}
	return sandbox.Image{ID: img.ID, RepoTags: []string{img.Name}, Labels: img.Labels}, nil
}

// RemoveImage removes an image from the builder's engine and from every
// node that has it, once the copies and imports of it under way have
// stopped (they would bring it back): it cancels them rather than wait for
// them to land, so a fork killed while its image is still being copied to
// the other nodes goes at once. KindNotFound when none had it.
func (r *Runtime) RemoveImage(ctx context.Context, ref string) error {
	if err := r.stopCopies(ctx, ref); err != nil {
		return err
	}
	r.forgetPushed(ref)
	defer r.forgetImageID(ref)
	err := r.cfg.Images.RemoveImage(ctx, ref)
	if err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
		return err
	}
	removed := err == nil
	if r.cfg.Nodes != nil {
		hs, _, err := r.holders(ctx, ref)
		if err != nil {
			return err
		}
		for _, n := range hs {
			err := r.cfg.Nodes.RemoveImage(ctx, n, ref)
			if err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
				return err
			}
			r.forgetImage(n, ref)
			removed = true
		}
	}
	if !removed {
		return sandbox.Errorf(sandbox.KindNotFound, "no image %s", ref)
	}
	return nil
}

// placement is where a pod of an image may run, and what it runs.
type placement struct {
	nodes []string // nil: any
	id    string   // the image's ID
	// pull names the image in Config.Registry by digest, which the pod
	// runs instead of its name; "": the pod runs the image by name.
	pull string
}

// placeImage makes sure nodes have the image ref names before a pod of it
// is made (or, with Config.Registry, that the registry has it), and says
// where the pod may run.
func (r *Runtime) placeImage(ctx context.Context, ref string) (placement, error) {
	if committed(ref) && r.cfg.Nodes != nil {
		if at, ok := r.pushedSnapshot(ctx, ref); ok {
			return at, nil
		}
		// Where it was committed, even once the builder has a copy.
		if hs, img, err := r.holders(ctx, ref); err == nil && len(hs) > 0 {
			r.spread(ref, img.ID, hs)
			return placement{nodes: hs, id: img.ID}, nil
		}
	}
	id, err := r.builderImageID(ctx, ref)
	switch {
	case err == nil && r.cfg.Registry != "":
		pull, err := r.push(ctx, ref, id)
		return placement{id: id, pull: pull}, err
	case err == nil:
		if r.cfg.PullPolicy != "Never" || r.cfg.Nodes == nil {
			return placement{id: id}, nil
		}
		nodes, err := r.importEverywhere(ctx, ref, id)
		return placement{nodes: nodes, id: id}, err
	case sandbox.KindOf(err) != sandbox.KindNotFound || r.cfg.Nodes == nil:
		return placement{}, err
	}
	hs, img, err := r.holders(ctx, ref)
	if err != nil {
		return placement{}, err
	}
	if len(hs) == 0 {
		return placement{}, sandbox.Errorf(sandbox.KindNotFound, "image %s is neither in the builder's Docker engine nor on any node", ref)
	}
	r.spread(ref, img.ID, hs)
	return placement{nodes: hs, id: img.ID}, nil
}

// registryTarget is the name the builder's image ref takes in
// Config.Registry: its path and tag there.
func (r *Runtime) registryTarget(ref string) (string, error) {
	n, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", sandbox.Errorf(sandbox.KindInvalid, "image %q: %v", ref, err)
	}
	tag := "latest"
	if t, ok := n.(reference.Tagged); ok {
		tag = t.Tag()
	}
	return r.cfg.Registry + "/" + reference.Path(n) + ":" + tag, nil
}

// push makes sure Config.Registry has the builder's image ref (of ID id)
// and returns its name there by digest: one push per name and ID however
// many ask (fly), which a removal of the image stops (stopCopies).
func (r *Runtime) push(ctx context.Context, ref, id string) (string, error) {
	key := imageName(ref) + " " + id
	pushed := func() (string, bool) {
		r.img.mu.Lock()
		defer r.img.mu.Unlock()
		pull, ok := r.img.pushed[key]
		return pull, ok
	}
	if pull, ok := pushed(); ok {
		return pull, nil
	}
	// A flight that ended since the look above pushed it already.
	err := r.fly(ctx, pushKey+key, ref, func(ctx context.Context) error {
		if _, ok := pushed(); ok {
			return nil
		}
		return r.pushOnce(ctx, key, ref)
	},
		fmt.Sprintf("image %s is still being pushed to %s: try again in a while", ref, r.cfg.Registry))
	if err != nil {
		return "", err
	}
	pull, _ := pushed()
	return pull, nil
}

// forgetPushed forgets the pushes of ref, whatever its ID: the registry
// keeps its copies (its own garbage collection removes them), but a pod of
// an image of that name made later pushes it again.
func (r *Runtime) forgetPushed(ref string) {
	prefix := imageName(ref) + " "
	r.img.mu.Lock()
	defer r.img.mu.Unlock()
	for k := range r.img.pushed {
		if strings.HasPrefix(k, prefix) {
			delete(r.img.pushed, k)
		}
	}
}

// pushKey marks a push among the flights of nodeImages.imports.
const pushKey = "push "

// pushOnce pushes ref and records its name by digest under key.
func (r *Runtime) pushOnce(ctx context.Context, key, ref string) error {
	pusher, ok := r.cfg.Source.(ImagePusher)
	if !ok {
		return sandbox.Errorf(sandbox.KindUnavailable, "this server's image source cannot push image %s to registry %s", ref, r.cfg.Registry)
	}
	target, err := r.registryTarget(ref)
	if err != nil {
		return err
	}
	start := time.Now()
	pull, err := pusher.PushImage(ctx, ref, target)
	if err != nil {
		r.log.Warn("image push failed", logkey.Image, ref, "to", target, "err", err)
		return sandbox.Wrap(sandbox.KindOf(err), err, "the nodes pull images from "+r.cfg.Registry)
	}
	r.img.mu.Lock()
	r.img.pushed[key] = pull
	r.img.mu.Unlock()
	r.log.Info("image pushed to the registry", logkey.Image, ref, "as", pull, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// Distribute brings the builder's image ref to the nodes now, as the
// first pod of it would, saying so on out: the last step of a template
// build, so that the template's first sandbox does not wait for it. A
// failure is said on out, not returned: the image is built, and its first
// pod tries again.
func (r *Runtime) Distribute(ctx context.Context, ref string, out func(line string)) {
	r.forgetImageID(ref) // just built
	if r.cfg.Registry != "" {
		r.distributeToRegistry(ctx, ref, out)
		return
	}
	if r.cfg.PullPolicy != "Never" || r.cfg.Nodes == nil {
		return
	}
	id, err := r.cfg.Images.ImageID(ctx, ref)
	if err == nil {
		out("importing the image into the cluster's nodes")
		start := time.Now()
		var nodes []string
		if nodes, err = r.importEverywhere(ctx, ref, id); err == nil {
			out(fmt.Sprintf("the image is on %s (%v)", strings.Join(nodes, ", "), time.Since(start).Round(100*time.Millisecond)))
			return
		}
	}
	out("the image could not be imported into the nodes; its first sandbox tries again: " + err.Error())
}

// distributeToRegistry is Distribute with Config.Registry: it pushes the
// image there.
func (r *Runtime) distributeToRegistry(ctx context.Context, ref string, out func(line string)) {
	id, err := r.cfg.Images.ImageID(ctx, ref)
	if err == nil {
		out("pushing the image to " + r.cfg.Registry + ", where the cluster's nodes pull it")
		start := time.Now()
		var pull string
		if pull, err = r.push(ctx, ref, id); err == nil {
			out(fmt.Sprintf("pushed as %s (%v)", pull, time.Since(start).Round(100*time.Millisecond)))
			return
		}
	}
	out("the image could not be pushed to the registry; its first sandbox tries again: " + err.Error())
}

// importEverywhere brings the builder's image ref (of ID id) to every node
// with an agent, and returns those that have it. An import that fails
// leaves its node out (logged); only when none has it does placing fail.
func (r *Runtime) importEverywhere(ctx context.Context, ref, id string) ([]string, error) {
	nodes, err := r.agentNodes(ctx)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, sandbox.Errorf(sandbox.KindUnavailable,
			"no node agent runs, so no node can get image %s: apply the warren-node DaemonSet of deploy/kubernetes/ (kubectl -n %s get pods -l %s)", ref, r.ns, NodeAgentLabel)
	}
	save := func(ctx context.Context) (io.ReadCloser, error) {
		if r.cfg.Source == nil {
			return nil, sandbox.Errorf(sandbox.KindUnavailable, "this server has no image source to import image %s from", ref)
		}
		return r.cfg.Source.SaveImage(ctx, ref)
	}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = r.ensureOn(ctx, n, ref, id, save) })
	}
	wg.Wait()
	var have []string
	var failed error
	for i, n := range nodes {
		if errs[i] != nil {
			r.log.WarnContext(ctx, "a node lacks an image: pods of it avoid the node", "node", n, logkey.Image, ref, "err", errs[i])
			failed = cmp.Or(failed, errs[i])
			continue
		}
		have = append(have, n)
	}
	if have == nil {
		return nil, failed
	}
	return have, nil
}

// committed reports whether ref names an image committed on a node: a
// snapshot's, a fork's, a stopped sandbox's.
func committed(ref string) bool {
	n, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return false
	}
	repo := reference.FamiliarName(n)
	return repo == sandbox.SnapshotRepo || repo == sandbox.ForkRepo || repo == stoppedRepo
}

// toBuilder copies the image ref, just committed on node, into the
// builder's engine in the background, for templates built on it; with
// Config.Registry, then pushes it there, so that its pods pull it on any
// node (placeImage).
func (r *Runtime) toBuilder(node, ref string) {
	if r.cfg.Source == nil {
		return
	}
	ctx, end := r.startCopy(imageName(ref), true)
	go func() {
		err := r.copyToBuilder(ctx, node, ref)
		end()
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("cannot copy a snapshot into the builder's Docker engine: templates cannot be built on it", logkey.Image, ref, "node", node, "err", err)
			}
			return
		}
		if r.cfg.Registry == "" {
			return
		}
		// A push is a flight of its own, which a removal of the image stops.
		id, err := r.cfg.Images.ImageID(r.ctx, ref)
		if err == nil {
			_, err = r.push(r.ctx, ref, id)
		}
		if err != nil && r.ctx.Err() == nil {
			r.log.Info("a snapshot was not pushed to the registry: its sandboxes stay on the nodes that have it", logkey.Image, ref, "err", err)
		}
	}()
}

// copyToBuilder streams node's image ref into the builder's engine.
func (r *Runtime) copyToBuilder(ctx context.Context, node, ref string) error {
	ctx, cancel := context.WithTimeout(ctx, importTimeout)
	defer cancel()
	tar, err := r.cfg.Nodes.ExportImage(ctx, node, ref)
	if err != nil {
		return err
	}
	defer tar.Close()
	return r.cfg.Source.LoadImage(ctx, tar)
}

// pushedSnapshot returns where the committed image ref may run when
// Config.Registry has it (a snapshot, once copied into the builder and
// pushed): anywhere, pulled by digest.
func (r *Runtime) pushedSnapshot(ctx context.Context, ref string) (placement, bool) {
	if r.cfg.Registry == "" {
		return placement{}, false
	}
	id, err := r.cfg.Images.ImageID(ctx, ref)
	if err != nil {
		return placement{}, false
	}
	r.img.mu.Lock()
	defer r.img.mu.Unlock()
	pull, ok := r.img.pushed[imageName(ref)+" "+id]
	return placement{id: id, pull: pull}, ok
}

// stopCopies cancels the background copies and the imports of ref under
// way, and waits for them to end.
func (r *Runtime) stopCopies(ctx context.Context, ref string) error {
	name := imageName(ref)
	r.img.mu.Lock()
	var wait []chan struct{}
	for ch, c := range r.img.copies {
		if c.name == name {
			c.cancel()
			wait = append(wait, ch)
		}
	}
	for _, f := range r.img.imports {
		if f.name == name {
			f.cancel()
			wait = append(wait, f.done)
		}
	}
	r.img.mu.Unlock()
	return waitAll(ctx, wait)
}

// BuilderCopies waits until the snapshots being copied into the builder's
// engine are there (or ctx ends): a template build may start from one.
func (r *Runtime) BuilderCopies(ctx context.Context) error {
	return r.waitCopies(ctx, func(c copyOf) bool { return c.toBuilder })
}

// startCopy records a background copy of the image name (normalized),
// into the builder or not; it returns the copy's context, which
// stopCopies cancels, and the function that ends it.
func (r *Runtime) startCopy(name string, toBuilder bool) (_ context.Context, end func()) {
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan struct{})
	r.img.mu.Lock()
	r.img.copies[done] = copyOf{name: name, toBuilder: toBuilder, cancel: cancel}
	r.img.mu.Unlock()
	return ctx, func() {
		r.img.mu.Lock()
		delete(r.img.copies, done)
		r.img.mu.Unlock()
		cancel()
		close(done)
	}
}

// waitCopies waits for the background copies under way that match.
func (r *Runtime) waitCopies(ctx context.Context, match func(copyOf) bool) error {
	r.img.mu.Lock()
	var wait []chan struct{}
	for ch, c := range r.img.copies {
		if match(c) {
			wait = append(wait, ch)
		}
	}
	r.img.mu.Unlock()
	return waitAll(ctx, wait)
}

// waitAll waits until every channel of chans is closed, or ctx ends.
func waitAll(ctx context.Context, chans []chan struct{}) error {
	for _, ch := range chans {
		select {
		case <-ch:
		case <-ctx.Done():
			return sandbox.Wrap(sandbox.KindUnavailable, ctx.Err(), "an image is still being copied")
		}
	}
	return nil
}

// spread copies the committed image ref (of ID id), which holders have, to
// the other nodes with an agent, in the background.
func (r *Runtime) spread(ref, id string, holders []string) {
	ctx, end := r.startCopy(imageName(ref), false)
	go func() {
		defer end()
		nodes, err := r.agentNodes(ctx)
		if err != nil {
			return
		}
		from := holders[0]
		export := func(ctx context.Context) (io.ReadCloser, error) { return r.cfg.Nodes.ExportImage(ctx, from, ref) }
		for _, n := range nodes {
			if slices.Contains(holders, n) {
				continue
			}
			if err := r.ensureOn(ctx, n, ref, id, export); err != nil && ctx.Err() == nil {
				r.log.Warn("cannot copy an image to another node: its pods stay on the nodes that have it", logkey.Image, ref,
					"from", from, "node", n, "err", err)
			}
		}
	}()
}

// ensureOn makes sure node has image ref with ID id, importing it from
// what source streams when not: one import per node, name and ID however
// many ask (fly).
func (r *Runtime) ensureOn(ctx context.Context, node, ref, id string, source func(context.Context) (io.ReadCloser, error)) error {
	if img, ok, err := r.nodeImage(ctx, node, ref); err == nil && ok && img.ID == id {
		return nil
	}
	return r.fly(ctx, node+" "+imageName(ref)+" "+id, ref, func(ctx context.Context) error { return r.runImport(ctx, node, ref, id, source) },
		fmt.Sprintf("image %s is still being imported into node %s: try again in a while", ref, node))
}

// fly runs do once for key however many callers ask at once, as a flight
// of nodeImages.imports for image ref, bounded by the runtime's life,
// importTimeout and a removal of the image (stopCopies). A caller waits
// for it, or until ctx ends (saying waiting); the flight goes on then, so
// that a retry finds it done.
func (r *Runtime) fly(ctx context.Context, key, ref string, do func(context.Context) error, waiting string) error {
	c := r.img
	c.mu.Lock()
	f, ok := c.imports[key]
	if !ok {
		fctx, cancel := context.WithTimeout(r.ctx, importTimeout)
		f = &importFlight{name: imageName(ref), cancel: cancel, done: make(chan struct{})}
		c.imports[key] = f
		go func() {
			defer func() {
				c.mu.Lock()
				delete(c.imports, key)
				c.mu.Unlock()
				cancel()
				close(f.done)
			}()
			f.err = do(fctx)
		}()
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return sandbox.Wrap(sandbox.KindUnavailable, ctx.Err(), waiting)
	}
}

// runImport runs one import for ensureOn, and logs it.
func (r *Runtime) runImport(ctx context.Context, node, ref, id string, source func(context.Context) (io.ReadCloser, error)) error {
	start := time.Now()
	r.log.Info("importing an image into a node", logkey.Image, ref, "node", node)
	err := r.importOnce(ctx, node, ref, id, source)
	switch {
	case err != nil && errors.Is(ctx.Err(), context.Canceled) && r.ctx.Err() == nil:
		r.log.Info("image import stopped: the image is being removed", logkey.Image, ref, "node", node)
	case err != nil:
		r.log.Warn("image import failed", logkey.Image, ref, "node", node, "err", err)
	default:
		r.log.Info("image imported", logkey.Image, ref, "node", node, "took", time.Since(start).Round(time.Millisecond))
	}
	return err
}

func (r *Runtime) importOnce(ctx context.Context, node, ref, id string, source func(context.Context) (io.ReadCloser, error)) error {
	tar, err := source(ctx)
	if err != nil {
		return sandbox.Wrap(sandbox.KindOf(err), err, fmt.Sprintf("cannot read image %s to import it into node %s", ref, node))
	}
	defer tar.Close()
	imgs, err := r.cfg.Nodes.ImportImage(ctx, node, tar)
	if err != nil {
		return sandbox.Wrap(sandbox.KindUnavailable, err, fmt.Sprintf(
			"cannot import image %s into node %s: see its node agent's log (kubectl -n %s logs -l %s --field-selector spec.nodeName=%s)",
			ref, node, r.ns, NodeAgentLabel, node))
	}
	name := imageName(ref)
	var got *nodeagent.Image
	for i := range imgs {
		r.noteImage(node, imgs[i])
		if imageName(imgs[i].Name) == name {
			got = &imgs[i]
		}
	}
	switch {
	case got == nil:
		return sandbox.Errorf(sandbox.KindInternal, "node %s imported no image named %s", node, name)
	case got.ID != id:
		return sandbox.Errorf(sandbox.KindUnavailable, "node %s imported image %s as %s, not %s: it was rebuilt meanwhile; try again", node, ref, got.ID, id)
	}
	return nil
}

// collectImages removes from the nodes the images of built templates the
// builder no longer has (a template deleted, a build superseded) and no
// pod of the node runs: every gcInterval. Snapshots' and forks' images are
// removed with them (RemoveImage), a stopped sandbox's with it (Remove),
// and a rebuilt image's old copy when the new one is imported under its
// name.
func (r *Runtime) collectImages(ctx context.Context) {
	nodes, err := r.agentNodes(ctx)
	if err != nil {
		r.log.WarnContext(ctx, "image collection: cannot list the node agents", "err", err)
		return
	}
	inUse := map[string]bool{} // node and image name
	pods, _ := r.pods.List(labels.Everything())
	for _, p := range pods {
		for _, ct := range p.Spec.Containers {
			inUse[p.Spec.NodeName+" "+imageName(ct.Image)] = true
		}
	}
	for _, n := range nodes {
		r.forgetNode(n) // read afresh: images come and go behind the runtime's back too
		if err := r.loadNode(ctx, n); err != nil {
			r.log.WarnContext(ctx, "image collection: cannot list a node's images", "node", n, "err", err)
			continue
		}
		r.img.mu.Lock()
		var names []string
		for name := range r.img.byNode[n] {
			names = append(names, name)
		}
		r.img.mu.Unlock()
		for _, name := range names {
			if !templateImage(name) || inUse[n+" "+name] {
				continue
			}
			if ok, err := r.cfg.Images.ImageExists(ctx, name); err != nil || ok {
				continue
			}
			if err := r.cfg.Nodes.RemoveImage(ctx, n, name); err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
				r.log.WarnContext(ctx, "image collection: cannot remove an image from a node", "node", n, logkey.Image, name, "err", err)
				continue
			}
			r.forgetImage(n, name)
			r.log.InfoContext(ctx, "removed from a node an image no template uses any more", "node", n, logkey.Image, name)
		}
	}
}

// templateImage reports whether a normalized image name is a built
// template's.
func templateImage(name string) bool {
	n, err := reference.ParseNormalizedNamed(name)
	return err == nil && strings.HasPrefix(reference.FamiliarName(n), sandbox.TemplateRepo+"/")
}

// collectLoop runs collectImages until the runtime closes.
func (r *Runtime) collectLoop() {
	t := time.NewTimer(gcDelay)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
			if r.cfg.Leading == nil || r.cfg.Leading() {
				r.collectImages(r.ctx)
			}
			t.Reset(gcInterval)
		}
	}
}

// CheckRuntime checks that the cluster can run sandboxes under rt: for
// gVisor, that its RuntimeClass exists.
func (r *Runtime) CheckRuntime(ctx context.Context, rt sandbox.OCIRuntime) error {
	if rt != sandbox.RuntimeGVisor {
		return nil
	}
	_, err := r.cli.NodeV1().RuntimeClasses().Get(ctx, r.cfg.GVisorRuntimeClass, metaGet)
	if apierrors.IsNotFound(err) {
		return sandbox.Errorf(sandbox.KindUnavailable, "the cluster has no RuntimeClass %q: apply deploy/kubernetes/runtimeclass-gvisor.yaml on nodes with runsc, or pass --gvisor-runtime-class", r.cfg.GVisorRuntimeClass)
	}
	return classify(err, "cannot read the gVisor RuntimeClass")
}
