package docker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/phases"
	"github.com/warrenhq/warren/internal/sandbox"
)

// A fork's files without a commit: the source's writable layer (overlay2's
// upper directory, what it wrote over its image) is copied into its memory
// image while it is frozen, and from there into each fork's own layer
// before the fork starts, the fork being created from the source's image.
// A commit would tar the layer, unpack it as a new image layer and make an
// image to remove later, 75–400 ms of the fork under load while the
// source stays frozen. A layer larger than maxCopiedFiles is committed
// instead: a commit is shared by every fork, a copy is made per fork.

var _ sandbox.FileCopier = (*Runtime)(nil)

// filesDir is where a memory image keeps its container's writable layer.
const filesDir = "files"

// maxCopiedFiles is the largest writable layer SaveFiles copies.
const maxCopiedFiles = 256 << 20

// SaveFiles copies frozen container id's writable layer into the memory
// image key. KindUnavailable when it cannot (another storage driver than
// overlay2, a layer above maxCopiedFiles): the caller commits instead.
func (r *Runtime) SaveFiles(ctx context.Context, id, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	dir, err := r.memoryDir(ctx)
	if err != nil {
		return err
	}
	upper, err := r.upperDir(ctx, id)
	if err != nil {
		return err
	}
	if n, err := dirSize(upper); err != nil || n > maxCopiedFiles {
		return sandbox.Errorf(sandbox.KindUnavailable, "the sandbox's files are not copied (%d bytes, %v): committed instead", n, err)
	}
	dst := filepath.Join(dir, key, filesDir)
	if err := copyLayer(ctx, upper, dst); err != nil {
		os.RemoveAll(dst)
		return sandbox.Wrap(sandbox.KindInternal, err, "cannot copy the sandbox's files")
	}
	return nil
}

// upperDir returns the host directory of container id's writable layer;
// KindUnavailable when its storage driver keeps none (not overlay2).
func (r *Runtime) upperDir(ctx context.Context, id string) (string, error) {
	in, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return "", classify(err, "cannot inspect the sandbox's container")
	}
	gd := in.Container.GraphDriver
	if gd == nil || gd.Name != "overlay2" || gd.Data["UpperDir"] == "" {
		return "", sandbox.Errorf(sandbox.KindUnavailable, "the engine's storage driver keeps no writable layer Warren can copy")
	}
	return gd.Data["UpperDir"], nil
}

// restoreFiles copies the files kept in the memory image at src, if it
// keeps any, into container id's writable layer, before it starts.
func (r *Runtime) restoreFiles(ctx context.Context, id, src string) error {
	files := filepath.Join(src, filesDir)
	if _, err := os.Stat(files); os.IsNotExist(err) {
		return nil
	}
	upper, err := r.upperDir(ctx, id)
	if err != nil {
		return err
	}
	if err := copyLayer(ctx, files, upper); err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "cannot copy the source's files into the sandbox")
	}
	phases.Mark(ctx, "files")
	return nil
}

// copyLayer copies the overlay layer src into dst as it is: owners,
// modes, times, links, and the whiteouts (0/0 character devices) and
// opaque directories (trusted.overlay.* attributes) by which a layer
// hides what is below it, which only cp -a as root keeps.
func copyLayer(ctx context.Context, src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "cp", "-a", "--", src+"/.", dst+"/").CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp -a %s %s: %w: %s", src, dst, err, bytes.TrimSpace(out))
	}
	return nil
}
