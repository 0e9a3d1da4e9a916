package kubernetes

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/warrenhq/warren/internal/nodeagent"
	"github.com/warrenhq/warren/internal/sandbox"
)

// builder is the builder's Docker engine: images by name and ID, saved as
// a one-line "tar" that the fake node agents import.
type builder struct {
	mu    sync.Mutex
	ids   map[string]string // normalized name → ID
	saves atomic.Int32
	// pushes are "target id" of each push; pushFails fails them.
	pushes    []string
	pushFails error
}

// newBuilder has warren/base, of ID sha256:abc.
func newBuilder() *builder {
	return &builder{ids: map[string]string{imageName("warren/base"): "sha256:abc"}}
}

func (b *builder) set(ref, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ids[imageName(ref)] = id
}

func (b *builder) id(ref string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id, ok := b.ids[imageName(ref)]
	return id, ok
}

func (b *builder) ImageExists(_ context.Context, ref string) (bool, error) {
	_, ok := b.id(ref)
	return ok, nil
}

func (b *builder) ImageID(_ context.Context, ref string) (string, error) {
	if id, ok := b.id(ref); ok {
		return id, nil
	}
	return "", sandbox.Errorf(sandbox.KindNotFound, "no image %s", ref)
}

func (b *builder) ImageLabels(ctx context.Context, ref string) (map[string]string, error) {
	_, err := b.ImageID(ctx, ref)
	return nil, err
}

func (b *builder) InspectImage(ctx context.Context, ref string) (sandbox.Image, error) {
	id, err := b.ImageID(ctx, ref)
	return sandbox.Image{ID: id, RepoTags: []string{ref}}, err
}

func (b *builder) RemoveImage(_ context.Context, ref string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.ids[imageName(ref)]; !ok {
		return sandbox.Errorf(sandbox.KindNotFound, "no image %s", ref)
	}
	delete(b.ids, imageName(ref))
	return nil
}

func (b *builder) SaveImage(_ context.Context, ref string) (io.ReadCloser, error) {
	id, ok := b.id(ref)
	if !ok {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "no image %s", ref)
	}
	b.saves.Add(1)
	return io.NopCloser(strings.NewReader(imageName(ref) + " " + id)), nil
}

func (b *builder) LoadImage(_ context.Context, tar io.Reader) error {
	data, err := io.ReadAll(tar)
	if err != nil {
		return err
	}
	name, id, ok := strings.Cut(string(data), " ")
	if !ok {
		return fmt.Errorf("not an image: %q", data)
	}
	b.set(name, id)
	return nil
}

// PushImage pushes as a registry would: the digest is made of the ID.
func (b *builder) PushImage(_ context.Context, ref, target string) (string, error) {
	id, ok := b.id(ref)
	if !ok {
		return "", sandbox.Errorf(sandbox.KindNotFound, "no image %s", ref)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pushFails != nil {
		return "", b.pushFails
	}
	b.pushes = append(b.pushes, target+" "+id)
	name, _, _ := strings.Cut(target, ":latest")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return name + "@sha256:m" + strings.TrimPrefix(id, "sha256:"), nil
}

func (b *builder) pushed() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.pushes)
}

// nodes is a NodeAgents that records what it is asked and keeps each
// node's images.
type nodes struct {
	mu      sync.Mutex
	calls   []string // freeze, thaw, pids, stats
	err     error
	names   []string
	images  map[string]map[string]nodeagent.Image // node → name → image
	imports []string                              // "node name id" of each import
	removed []string                              // "node name" of each removal
	commits int
	// gate, when set, holds every import until it is closed.
	gate chan struct{}
	// failImport names nodes whose imports fail.
	failImport map[string]bool
	// addrs are each node's host's addresses; addrsErr fails their
	// listing.
	addrs    map[string][]netip.Addr
	addrsErr error
}

func newNodes(names ...string) *nodes {
	n := &nodes{names: names, images: map[string]map[string]nodeagent.Image{}, failImport: map[string]bool{}}
	for _, name := range names {
		n.images[name] = map[string]nodeagent.Image{}
	}
	return n
}

func (n *nodes) record(op, node, uid string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = append(n.calls, op+" "+node+" "+uid)
	return n.err
}
func (n *nodes) Freeze(_ context.Context, node, uid string) error {
	return n.record("freeze", node, uid)
}
func (n *nodes) Thaw(_ context.Context, node, uid string) error { return n.record("thaw", node, uid) }
func (n *nodes) SetPidsLimit(_ context.Context, node, uid string, _ int) error {
	return n.record("pids", node, uid)
}
func (n *nodes) SpareAgent(_ context.Context, node, uid string) error {
	return n.record("spare", node, uid)
}
func (n *nodes) Stats(_ context.Context, node, uid string) (nodeagent.Stats, error) {
	return nodeagent.Stats{CPUNanos: 1, MemUsed: 10 << 20}, n.record("stats", node, uid)
}
func (n *nodes) Addresses(_ context.Context, node string) ([]netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.addrs[node]), n.addrsErr
}
func (n *nodes) got() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.calls)
}

func (n *nodes) Nodes(context.Context) ([]string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.names), nil
}

func (n *nodes) ImportImage(ctx context.Context, node string, tar io.Reader) ([]nodeagent.Image, error) {
	b, err := io.ReadAll(tar)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	gate, fail := n.gate, n.failImport[node]
	n.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if fail {
		return nil, sandbox.Errorf(sandbox.KindInternal, "the node agent refused: disk full")
	}
	name, id, ok := strings.Cut(string(b), " ")
	if !ok {
		return nil, fmt.Errorf("not an image: %q", b)
	}
	img := nodeagent.Image{Name: name, ID: id, Size: 1 << 20}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.imports = append(n.imports, node+" "+name+" "+id)
	n.images[node][name] = img
	return []nodeagent.Image{img}, nil
}

func (n *nodes) Images(_ context.Context, node string) ([]nodeagent.Image, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Collect(maps.Values(n.images[node])), nil
}

func (n *nodes) has(node, ref string) (nodeagent.Image, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	img, ok := n.images[node][imageName(ref)]
	return img, ok
}

func (n *nodes) put(node, ref, id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.images[node][imageName(ref)] = nodeagent.Image{Name: imageName(ref), ID: id}
}

func (n *nodes) importsDone() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.imports)
}

func (n *nodes) RemoveImage(_ context.Context, node, ref string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.images[node][imageName(ref)]; !ok {
		return sandbox.Errorf(sandbox.KindNotFound, "no image %s on %s", ref, node)
	}
	delete(n.images[node], imageName(ref))
	n.removed = append(n.removed, node+" "+imageName(ref))
	return nil
}

func (n *nodes) ExportImage(_ context.Context, node, ref string) (io.ReadCloser, error) {
	img, ok := n.has(node, ref)
	if !ok {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "no image %s on %s", ref, node)
	}
	return io.NopCloser(strings.NewReader(img.Name + " " + img.ID)), nil
}

func (n *nodes) Commit(_ context.Context, node, uid, container, ref string, labels map[string]string) (nodeagent.Image, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return nodeagent.Image{}, n.err
	}
	n.commits++
	img := nodeagent.Image{Name: imageName(ref), ID: fmt.Sprintf("sha256:commit%d", n.commits), Labels: maps.Clone(labels)}
	n.images[node][img.Name] = img
	n.calls = append(n.calls, "commit "+node+" "+uid+" "+container+" "+img.Name)
	return img, nil
}
