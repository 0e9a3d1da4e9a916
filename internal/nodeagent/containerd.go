package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/images/archive"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/warrenhq/warren/internal/sandbox"
)

// CRINamespace is the containerd namespace of the kubelet's CRI: images
// there are the ones pods run.
const CRINamespace = "k8s.io"

// Labels the CRI plugin of containerd reads on image records and on the
// containers it makes for pods.
const (
	// criPinned keeps the kubelet's image garbage collection off an image:
	// imported and committed images have no registry to be pulled again
	// from; the control plane removes them when it no longer needs them.
	criPinned      = "io.cri-containerd.pinned"
	criKind        = "io.cri-containerd.kind"
	podUIDLabel    = "io.kubernetes.pod.uid"
	containerLabel = "io.kubernetes.container.name"
)

// Containerd is the image API on the node's containerd: images in
// CRINamespace, unpacked for the snapshotter the kubelet's pods use.
// All the work (unpacking, diffing a container's filesystem) is done by
// containerd itself through its API: the node agent mounts nothing.
type Containerd struct {
	c           *containerd.Client
	snapshotter string
	platform    platforms.MatchComparer
}

// NewContainerd connects to the containerd listening on socket and checks
// that it answers.
func NewContainerd(ctx context.Context, socket, snapshotter string) (*Containerd, error) {
	c, err := containerd.New(socket, containerd.WithDefaultNamespace(CRINamespace), containerd.WithTimeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("containerd at %s: %w", socket, err)
	}
	vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Version(vctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("containerd at %s does not answer (is it the node's containerd socket, mounted into the node agent?): %w", socket, err)
	}
	return &Containerd{c: c, snapshotter: snapshotter, platform: platforms.Default()}, nil
}

// Close closes the connection to containerd.
func (d *Containerd) Close() error { return d.c.Close() }

// withLease holds everything f writes to containerd (content, snapshots)
// until it returns, so that the garbage collector takes none of it half
// way, and takes what f left unreferenced once it has.
func (d *Containerd) withLease(ctx context.Context, f func(ctx context.Context) error) error {
	lctx, done, err := d.c.WithLease(ctx)
	if err != nil {
		return wrapContainerd(err, "cannot take a lease on containerd's content")
	}
	defer done(context.WithoutCancel(lctx))
	return f(lctx)
}

// Import loads the images of a tar (docker save's, or Export's) and
// unpacks them.
func (d *Containerd) Import(ctx context.Context, tar io.Reader) ([]Image, error) {
	var out []Image
	err := d.withLease(ctx, func(ctx context.Context) error {
		body := &bodyReader{r: tar}
		imgs, err := d.c.Import(ctx, body, containerd.WithImageLabels(map[string]string{criPinned: "pinned"}))
		if err != nil {
			if body.err != nil {
				return sandbox.Wrap(sandbox.KindInvalid, body.err, "reading the image archive failed")
			}
			if isContainerdFailure(err) {
				return wrapContainerd(err, "containerd could not import the image archive")
			}
			return sandbox.Wrap(sandbox.KindInvalid, err, "the body is not an image archive (a tar from docker save or from the node agent's export): "+err.Error())
		}
		var bad []string
		for _, img := range imgs {
			if !isNormalName(img.Name) {
				bad = append(bad, img.Name)
			}
		}
		if len(bad) > 0 {
			for _, name := range bad {
				_ = d.c.ImageService().Delete(ctx, name)
			}
			return sandbox.Errorf(sandbox.KindInvalid, "the archive names images by %q, not by NAME:TAG: save them by name", bad)
		}
		if len(imgs) == 0 {
			return sandbox.Errorf(sandbox.KindInvalid, "the archive names no image: save it by name (docker save NAME:TAG), not by ID")
		}
		for _, img := range imgs {
			if err := containerd.NewImage(d.c, img).Unpack(ctx, d.snapshotter); err != nil {
				// No name may stay for an image that cannot run: the
				// kubelet would take it for one the node has.
				for _, i := range imgs {
					_ = d.c.ImageService().Delete(context.WithoutCancel(ctx), i.Name)
				}
				if errdefs.IsNotFound(err) {
					return sandbox.Wrap(sandbox.KindInvalid, err, "the archive has no "+platforms.DefaultString()+" image (or not all of its layers: an export of a pulled image may leave out what is in its registry) for "+img.Name+": "+err.Error())
				}
				return wrapContainerd(err, "containerd could not unpack "+img.Name+" for "+d.snapshotter)
			}
			info, err := d.describe(ctx, img)
			if err != nil {
				return err
			}
			out = append(out, info)
		}
		return nil
	})
	return out, err
}

// bodyReader remembers a read error of the request body, which is the
// caller's (a cut connection), not the archive's or containerd's.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// List returns the node's named images (not the IDs and digests the CRI
// adds as further names of the same images).
func (d *Containerd) List(ctx context.Context) ([]Image, error) {
	imgs, err := d.c.ImageService().List(ctx)
	if err != nil {
		return nil, wrapContainerd(err, "containerd could not list images")
	}
	out := []Image{}
	for _, img := range imgs {
		if !isNormalName(img.Name) {
			continue
		}
		info, err := d.describe(ctx, img)
		if sandbox.KindOf(err) == sandbox.KindNotFound {
			continue // an image for another platform, or half pulled: no pod can run it here
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// Get returns the image named ref (normalized).
func (d *Containerd) Get(ctx context.Context, ref string) (Image, error) {
	img, err := d.get(ctx, ref)
	if err != nil {
		return Image{}, err
	}
	return d.describe(ctx, img)
}

func (d *Containerd) get(ctx context.Context, ref string) (images.Image, error) {
	img, err := d.c.ImageService().Get(ctx, ref)
	if errdefs.IsNotFound(err) {
		return img, sandbox.Errorf(sandbox.KindNotFound, "the node has no image %s", ref)
	}
	if err != nil {
		return img, wrapContainerd(err, "containerd could not look up "+ref)
	}
	return img, nil
}

// Remove removes the image named ref. When no other name is left for the
// same image, the CRI's names for it (its ID, its digests) go too, and the
// garbage collector runs before Remove returns: the image's content and
// snapshots are gone unless a container still runs on them.
func (d *Containerd) Remove(ctx context.Context, ref string) error {
	img, err := d.get(ctx, ref)
	if err != nil {
		return err
	}
	is := d.c.ImageService()
	all, err := is.List(ctx)
	if err != nil {
		return wrapContainerd(err, "containerd could not list images")
	}
	var aliases []string
	for _, o := range all {
		if o.Name == ref || o.Target.Digest != img.Target.Digest {
			continue
		}
		if isNormalName(o.Name) {
			aliases = nil // another name keeps the image: only ref goes
			break
		}
		aliases = append(aliases, o.Name)
	}
	for _, name := range aliases {
		if err := is.Delete(ctx, name); err != nil && !errdefs.IsNotFound(err) {
			return wrapContainerd(err, "containerd could not remove "+name)
		}
	}
	if err := is.Delete(ctx, ref, images.SynchronousDelete()); err != nil {
		if errdefs.IsNotFound(err) {
			return sandbox.Errorf(sandbox.KindNotFound, "the node has no image %s", ref)
		}
		return wrapContainerd(err, "containerd could not remove "+ref)
	}
	return nil
}

// Export writes the image named ref, for the node's platform, as a tar
// that Import and `docker load` take (an OCI layout with Docker's
// manifest.json beside it). Layers the node does not hold are left out: a
// pull does not fetch a layer whose snapshot containerd has already, and
// the CRI's discard_unpacked_layers drops the others once unpacked, so a
// pulled image, and a commit on one, may lack some. The index then names the registry
// repositories the image came from (containerd's distribution-source
// annotations, which a commit inherits from its base), where a registry
// push finds the missing layers (registry.Store.LoadImage); an import
// needs the whole image, and fails on such a tar saying a layer is missing.
func (d *Containerd) Export(ctx context.Context, ref string, w io.Writer) error {
	if _, err := d.get(ctx, ref); err != nil {
		return err
	}
	cs := d.c.ContentStore()
	held := func(desc ocispec.Descriptor) bool {
		_, err := cs.Info(ctx, desc.Digest)
		return err == nil
	}
	err := d.c.Export(ctx, w, archive.WithImage(d.c.ImageService(), ref), archive.WithPlatform(platforms.DefaultStrict()),
		archive.WithBlobFilter(held))
	if err != nil {
		return wrapContainerd(err, "exporting "+ref+" failed")
	}
	return nil
}

// describe reports an image as the API does.
func (d *Containerd) describe(ctx context.Context, img images.Image) (Image, error) {
	cs := d.c.ContentStore()
	cfgDesc, err := img.Config(ctx, cs, d.platform)
	if err != nil {
		return Image{}, wrapContainerd(err, "the config of "+img.Name+" is unreadable")
	}
	blob, err := content.ReadBlob(ctx, cs, cfgDesc)
	if err != nil {
		return Image{}, wrapContainerd(err, "the config of "+img.Name+" is unreadable")
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(blob, &cfg); err != nil {
		return Image{}, sandbox.Wrap(sandbox.KindInternal, err, "the config of "+img.Name+" is not JSON")
	}
	out := Image{Name: img.Name, ID: cfgDesc.Digest.String(), Labels: cfg.Config.Labels}
	sn := d.c.SnapshotService(d.snapshotter)
	for _, chain := range identity.ChainIDs(cfg.RootFS.DiffIDs) {
		u, err := sn.Usage(ctx, chain.String())
		if err == nil {
			out.Size += u.Size
		} else if !errdefs.IsNotFound(err) {
			return Image{}, wrapContainerd(err, "the snapshots of "+img.Name+" are unreadable")
		}
	}
	return out, nil
}

// isContainerdFailure reports whether err is containerd failing (or its
// connection), rather than its verdict on what it was given.
func isContainerdFailure(err error) bool {
	return errdefs.IsUnavailable(err) || errdefs.IsInternal(err) || errdefs.IsDataLoss(err) ||
		errdefs.IsResourceExhausted(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// wrapContainerd gives a containerd error its Warren kind.
func wrapContainerd(err error, msg string) error {
	if sandbox.KindOf(err) != sandbox.KindInternal {
		return err // already one of ours
	}
	switch {
	case errdefs.IsNotFound(err):
		return sandbox.Wrap(sandbox.KindNotFound, err, msg+": "+err.Error())
	case errdefs.IsInvalidArgument(err):
		return sandbox.Wrap(sandbox.KindInvalid, err, msg+": "+err.Error())
	case errdefs.IsAlreadyExists(err), errdefs.IsFailedPrecondition(err), errdefs.IsConflict(err):
		return sandbox.Wrap(sandbox.KindConflict, err, msg+": "+err.Error())
	case errdefs.IsUnavailable(err):
		return sandbox.Wrap(sandbox.KindUnavailable, err, msg+": containerd is unavailable: "+err.Error())
	}
	return fmt.Errorf("%s: %w", msg, err)
}
