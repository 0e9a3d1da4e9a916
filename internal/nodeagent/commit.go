package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/diff"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/labels"
	"github.com/containerd/containerd/v2/pkg/rootfs"
	"github.com/containerd/errdefs"
	digest "github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Commit writes the changes of the container named container of the pod
// uid (its snapshot against the image's) as one more layer on that image,
// named ref, with labels added to its config's, and unpacks it. The
// container is left as it was, running or frozen: containerd reads its
// snapshot's upper directory beside it.
func (d *Containerd) Commit(ctx context.Context, uid, container, ref string, extra map[string]string) (Image, error) {
	var out Image
	err := d.withLease(ctx, func(ctx context.Context) error {
		ctr, err := d.podContainer(ctx, uid, container)
		if err != nil {
			return err
		}
		sn := d.c.SnapshotService(ctr.Snapshotter)
		snap, err := sn.Stat(ctx, ctr.SnapshotKey)
		if err != nil {
			return wrapContainerd(err, "the container's snapshot is unreadable")
		}
		base, err := d.imageOf(ctx, ctr, snap.Parent)
		if err != nil {
			return err
		}
		manifest, err := images.Manifest(ctx, d.c.ContentStore(), base.Target, d.platform)
		if err != nil {
			return wrapContainerd(err, "the manifest of "+base.Name+" is unreadable")
		}
		layer, diffID, err := d.diffLayer(ctx, ctr)
		if err != nil {
			return err
		}
		if manifest.Config.MediaType == images.MediaTypeDockerSchema2Config {
			layer.MediaType = images.MediaTypeDockerSchema2LayerGzip // as the base's layers are
		}
		createdBy := fmt.Sprintf("warren commit of container %s of pod %s", container, uid)
		sources, err := d.sourceLabels(ctx, base.Target)
		if err != nil {
			return err
		}
		target, err := d.writeCommit(ctx, base.Name, manifest, layer, diffID, createdBy, extra, sources)
		if err != nil {
			return err
		}
		img := images.Image{Name: ref, Target: target, Labels: map[string]string{criPinned: "pinned"}}
		is := d.c.ImageService()
		if _, err := is.Create(ctx, img); errdefs.IsAlreadyExists(err) {
			if _, err := is.Update(ctx, img, "target", "labels"); err != nil {
				return wrapContainerd(err, "containerd could not point "+ref+" at the commit")
			}
		} else if err != nil {
			return wrapContainerd(err, "containerd could not name the commit "+ref)
		}
		if err := containerd.NewImage(d.c, img).Unpack(ctx, ctr.Snapshotter); err != nil {
			return wrapContainerd(err, "containerd could not unpack "+ref)
		}
		out, err = d.describe(ctx, img)
		return err
	})
	return out, err
}

// podContainer finds the container the CRI made for the container named
// name of the pod uid: the newest, should the kubelet have restarted it.
func (d *Containerd) podContainer(ctx context.Context, uid, name string) (containers.Container, error) {
	list, err := d.c.ContainerService().List(ctx, fmt.Sprintf(`labels.%q==%q`, podUIDLabel, uid))
	if err != nil {
		return containers.Container{}, wrapContainerd(err, "containerd could not list containers")
	}
	var found *containers.Container
	for i, c := range list {
		if c.Labels[containerLabel] != name || c.Labels[criKind] != "container" {
			continue
		}
		if found == nil || c.CreatedAt.After(found.CreatedAt) {
			found = &list[i]
		}
	}
	if found == nil {
		return containers.Container{}, sandbox.Errorf(sandbox.KindNotFound, "the node has no container %q of pod %s", name, uid)
	}
	return *found, nil
}

// imageOf returns the image a container was made from: the one it names
// if that one's layers are the container's snapshot's parent (the name may
// since have moved to another image), else any image with those layers.
func (d *Containerd) imageOf(ctx context.Context, ctr containers.Container, parent string) (images.Image, error) {
	is := d.c.ImageService()
	var candidates []images.Image
	if img, err := is.Get(ctx, ctr.Image); err == nil {
		candidates = append(candidates, img)
	}
	all, err := is.List(ctx)
	if err != nil {
		return images.Image{}, wrapContainerd(err, "containerd could not list images")
	}
	candidates = append(candidates, all...)
	for _, img := range candidates {
		diffIDs, err := img.RootFS(ctx, d.c.ContentStore(), d.platform)
		if err == nil && identity.ChainID(diffIDs).String() == parent {
			return img, nil
		}
	}
	return images.Image{}, sandbox.Errorf(sandbox.KindConflict, "the image the container runs (%s) is no longer on the node: nothing to commit onto", ctr.Image)
}

// diffLayer has containerd write the container's changes as a gzipped
// layer into its content store, and returns it with its diff ID.
func (d *Containerd) diffLayer(ctx context.Context, ctr containers.Container) (ocispec.Descriptor, digest.Digest, error) {
	sn := d.c.SnapshotService(ctr.Snapshotter)
	layer, err := rootfs.CreateDiff(ctx, ctr.SnapshotKey, sn, d.c.DiffService(), diff.WithMediaType(ocispec.MediaTypeImageLayerGzip))
	if err != nil {
		return layer, "", wrapContainerd(err, "containerd could not diff the container's filesystem")
	}
	info, err := d.c.ContentStore().Info(ctx, layer.Digest)
	if err != nil {
		return layer, "", wrapContainerd(err, "the new layer is unreadable")
	}
	diffID, err := digest.Parse(info.Labels[labels.LabelUncompressed])
	if err != nil {
		return layer, "", sandbox.Wrap(sandbox.KindInternal, err, "containerd gave the new layer no uncompressed digest")
	}
	return layer, diffID, nil
}

// sourceLabels are the distribution-source labels of the image whose
// target is desc: the registry repositories containerd pulled it from,
// which it records on what it pulls (none for an imported image).
func (d *Containerd) sourceLabels(ctx context.Context, desc ocispec.Descriptor) (map[string]string, error) {
	info, err := d.c.ContentStore().Info(ctx, desc.Digest)
	if err != nil {
		return nil, wrapContainerd(err, "the base image's manifest is unreadable")
	}
	out := map[string]string{}
	for k, v := range info.Labels {
		if strings.HasPrefix(k, labels.LabelDistributionSource+".") {
			out[k] = v
		}
	}
	return out, nil
}

// writeCommit stores the config and manifest of the base image (named
// base, its manifest) with layer on top, and returns the manifest's
// descriptor. The manifest keeps the base's distribution-source labels
// (sources): its base layers are in those repositories, and a node that
// dropped them (Export) leaves a registry push to find them there.
func (d *Containerd) writeCommit(ctx context.Context, base string, manifest ocispec.Manifest, layer ocispec.Descriptor, diffID digest.Digest, createdBy string, extra, sources map[string]string) (ocispec.Descriptor, error) {
	cs := d.c.ContentStore()
	blob, err := content.ReadBlob(ctx, cs, manifest.Config)
	if err != nil {
		return ocispec.Descriptor{}, wrapContainerd(err, "the config of "+base+" is unreadable")
	}
	cfg, err := commitConfig(blob, diffID, time.Now().UTC(), createdBy, extra)
	if err != nil {
		return ocispec.Descriptor{}, sandbox.Wrap(sandbox.KindConflict, err, "the config of "+base+" cannot be extended: "+err.Error())
	}
	cfgDesc := ocispec.Descriptor{MediaType: manifest.Config.MediaType, Digest: digest.FromBytes(cfg), Size: int64(len(cfg))}
	if err := content.WriteBlob(ctx, cs, "warren-commit-"+cfgDesc.Digest.String(), bytes.NewReader(cfg), cfgDesc); err != nil {
		return ocispec.Descriptor{}, wrapContainerd(err, "containerd could not store the commit's config")
	}

	docker := manifest.Config.MediaType == images.MediaTypeDockerSchema2Config
	manifest.Config = cfgDesc
	manifest.Layers = append(manifest.Layers, layer)
	manifest.Subject = nil // the commit is an image of its own, not an artifact about the base
	if manifest.MediaType == "" {
		manifest.MediaType = ocispec.MediaTypeImageManifest
		if docker {
			manifest.MediaType = images.MediaTypeDockerSchema2Manifest
		}
	}
	mb, err := json.Marshal(manifest)
	if err != nil {
		return ocispec.Descriptor{}, sandbox.Wrap(sandbox.KindInternal, err, "encoding the commit's manifest")
	}
	desc := ocispec.Descriptor{MediaType: manifest.MediaType, Digest: digest.FromBytes(mb), Size: int64(len(mb))}
	// The manifest refers to its config and layers for the garbage
	// collector, as a pulled one does: they live as long as it does,
	// whatever happens to the base image.
	gc := map[string]string{"containerd.io/gc.ref.content.config": cfgDesc.Digest.String()}
	maps.Copy(gc, sources)
	for i, l := range manifest.Layers {
		gc["containerd.io/gc.ref.content.l."+strconv.Itoa(i)] = l.Digest.String()
	}
	if err := content.WriteBlob(ctx, cs, "warren-commit-"+desc.Digest.String(), bytes.NewReader(mb), desc, content.WithLabels(gc)); err != nil {
		return ocispec.Descriptor{}, wrapContainerd(err, "containerd could not store the commit's manifest")
	}
	return desc, nil
}

// commitConfig is the config of the base image (blob) with one more layer
// (diffID) and its history entry, labels added to its own, created now.
// Fields it does not know (Docker's among them) are kept as they are.
func commitConfig(blob []byte, diffID digest.Digest, created time.Time, createdBy string, extra map[string]string) ([]byte, error) {
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(blob, &cfg); err != nil {
		return nil, err
	}
	var rfs ocispec.RootFS
	if raw, ok := cfg["rootfs"]; ok {
		if err := json.Unmarshal(raw, &rfs); err != nil {
			return nil, fmt.Errorf("rootfs: %w", err)
		}
	}
	rfs.Type = "layers"
	rfs.DiffIDs = append(rfs.DiffIDs, diffID)
	var history []ocispec.History
	if raw, ok := cfg["history"]; ok {
		if err := json.Unmarshal(raw, &history); err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
	}
	history = append(history, ocispec.History{Created: &created, CreatedBy: createdBy})
	var run map[string]json.RawMessage
	if raw, ok := cfg["config"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &run); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	if run == nil {
		run = map[string]json.RawMessage{}
	}
	var lbls map[string]string
	if raw, ok := run["Labels"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &lbls); err != nil {
			return nil, fmt.Errorf("config.Labels: %w", err)
		}
	}
	if len(extra) > 0 {
		if lbls == nil {
			lbls = map[string]string{}
		}
		for k, v := range extra {
			lbls[k] = v
		}
	}
	set := func(m map[string]json.RawMessage, key string, v any) {
		b, _ := json.Marshal(v)
		m[key] = b
	}
	if lbls != nil {
		set(run, "Labels", lbls)
	}
	set(cfg, "config", run)
	set(cfg, "rootfs", rfs)
	set(cfg, "history", history)
	set(cfg, "created", created)
	return json.Marshal(cfg)
}
