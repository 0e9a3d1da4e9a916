package docker

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/phases"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Memory images: a running gVisor container's processes and memory,
// checkpointed with the container left running (runsc checkpoint
// --leave-running, through the engine's checkpoint API), kept under the
// engine's data root in warren-memory/<instance>/<key>, and restored into
// new containers of the same spec. The engine restores only from a
// container's own checkpoint directory (Docker 20.10 refuses a custom one
// at start), so each restore links the image's files into it: no copy,
// the data root being one filesystem. Like checkpoints, they are read and
// written on the engine's host, so the server must run there, as root.

var _ sandbox.MemoryCloner = (*Runtime)(nil)

// validKey is what a memory image's key may be: it names a directory.
var validKey = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// memoryDir returns the directory of this server's memory images.
func (r *Runtime) memoryDir(ctx context.Context) (string, error) {
	root, err := r.DataRoot(ctx)
	if err != nil {
		return "", err
	}
	return r.memoryDirIn(root), nil
}

func (r *Runtime) memoryDirIn(root string) string {
	return filepath.Join(root, "warren-memory", r.cfg.Instance)
}

// removeEmptyMemoryDir removes this server's memory images' directory if
// it holds none. It is made at the first image, and the instance names of
// servers that run once (tests, benchmarks) would otherwise pile up empty
// under the data root. A directory with images stays: they outlive the
// server, and the next one of this instance finds them.
func (r *Runtime) removeEmptyMemoryDir() {
	r.mu.Lock()
	root := r.dataRoot
	r.mu.Unlock()
	if root != "" {
		os.Remove(r.memoryDirIn(root)) // refused, as meant, while it holds images
	}
}

func checkKey(key string) error {
	if !validKey.MatchString(key) {
		return sandbox.Errorf(sandbox.KindInvalid, "invalid memory image key %q", key)
	}
	return nil
}

// SaveMemory checkpoints a running or frozen container as the memory image
// key, leaving it as it was: runsc stops the sandbox's kernel for the
// checkpoint only. A container stopped with its checkpoint (Checkpoint's,
// a sandbox paused to disk) gives that checkpoint, linked, and keeps it.
func (r *Runtime) SaveMemory(ctx context.Context, id, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	dir, err := r.memoryDir(ctx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "cannot make the memory images' directory")
	}
	dst := filepath.Join(dir, key)
	// A half-written image of an earlier attempt would make the engine
	// refuse the name.
	if err := os.RemoveAll(dst); err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "cannot clear the memory image's directory")
	}
	in, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return classify(err, "cannot inspect the sandbox's container")
	}
	switch st := in.Container.State; {
	case st != nil && st.Running:
		err = r.checkpointRunning(ctx, in.Container.ID, st.Pid, dir, key)
	default:
		err = r.linkCheckpoint(ctx, in.Container.ID, dst)
	}
	if err != nil {
		os.RemoveAll(dst)
		return err
	}
	// The engine wrote it on its host: a server elsewhere cannot hand it
	// to new containers.
	if _, err := os.Stat(filepath.Join(dst, "checkpoint.img")); err != nil {
		return sandbox.Errorf(sandbox.KindUnavailable, "the memory image is not on this server's host (%s): keeping memory needs the server on the engine's host", dir)
	}
	return nil
}

// checkpointRunning saves running container id (whose sandbox process is
// pid) as the memory image key in dir: with its own runsc where this
// host's /proc shows it, else through the engine.
func (r *Runtime) checkpointRunning(ctx context.Context, id string, pid int, dir, key string) error {
	if done, err := checkpointInPlace(ctx, id, pid, filepath.Join(dir, key), true); done || err != nil {
		return err
	}
	_, err := r.cli.CheckpointCreate(ctx, id, client.CheckpointCreateOptions{CheckpointID: key, CheckpointDir: dir})
	return classify(err, "cannot checkpoint the sandbox's container")
}

// linkCheckpoint makes dst a copy, linked, of stopped container id's
// checkpoint, which stays.
func (r *Runtime) linkCheckpoint(ctx context.Context, id, dst string) error {
	root, err := r.DataRoot(ctx)
	if err != nil {
		return err
	}
	src := filepath.Join(root, "containers", id, "checkpoints", checkpointName)
	if _, err := os.Stat(filepath.Join(src, "checkpoint.img")); err != nil {
		return sandbox.Errorf(sandbox.KindConflict, "the sandbox's container is stopped without its memory")
	}
	if err := linkTree(src, dst); err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "cannot copy the sandbox's checkpoint")
	}
	return nil
}

// CreateFromMemory creates spec's container and starts it from the memory
// image key, which stays, with the files SaveFiles kept in the image, if
// any, copied into its writable layer. The container is created before
// ready is asked whether the image is made: a fork's containers are made
// while its source is captured. On any failure the container is removed.
func (r *Runtime) CreateFromMemory(ctx context.Context, spec sandbox.ContainerSpec, key string, ready func(context.Context) error) (sandbox.Container, error) {
	if err := checkKey(key); err != nil {
		return sandbox.Container{}, err
	}
	dir, err := r.memoryDir(ctx)
	if err != nil {
		return sandbox.Container{}, err
	}
	src := filepath.Join(dir, key)
	if ready == nil {
		if _, err := os.Stat(src); err != nil {
			return sandbox.Container{}, sandbox.Errorf(sandbox.KindNotFound, "memory image %s not found", key)
		}
	}
	id, err := r.createContainer(ctx, spec)
	if err != nil {
		return sandbox.Container{}, err
	}
	if err := r.awaitImage(ctx, src, key, ready); err != nil {
		r.removeQuietly(ctx, id)
		return sandbox.Container{}, err
	}
	if err := r.restoreFiles(ctx, id, src); err != nil {
		r.removeQuietly(ctx, id)
		return sandbox.Container{}, err
	}
	c, err := r.restoreInto(ctx, id, src, key)
	if err != nil {
		r.removeQuietly(ctx, id)
		return sandbox.Container{}, err
	}
	return c, nil
}

// awaitImage returns once ready says the memory image key at src is made,
// and it is there.
func (r *Runtime) awaitImage(ctx context.Context, src, key string, ready func(context.Context) error) error {
	if ready == nil {
		return nil
	}
	if err := ready(ctx); err != nil {
		return err
	}
	phases.Mark(ctx, "image_wait")
	if _, err := os.Stat(src); err != nil {
		return sandbox.Errorf(sandbox.KindNotFound, "memory image %s not found", key)
	}
	return nil
}

// restoreInto hands the memory image at src to container id as its
// checkpoint key and starts the container from it.
func (r *Runtime) restoreInto(ctx context.Context, id, src, key string) (sandbox.Container, error) {
	info, err := r.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return sandbox.Container{}, classify(err, "docker engine unreachable")
	}
	dst := filepath.Join(info.Info.DockerRootDir, "containers", id, "checkpoints", key)
	if err := handOver(src, dst, info.Info.Runtimes[r.cfg.GVisorRuntime].Args); err != nil {
		return sandbox.Container{}, sandbox.Wrap(sandbox.KindInternal, err, "cannot hand the memory image to the container")
	}
	if err := markRestore(dst); err != nil {
		return sandbox.Container{}, err
	}
	phases.Mark(ctx, "memory_link")
	if _, err := r.cli.ContainerStart(ctx, id, client.ContainerStartOptions{CheckpointID: key}); err != nil {
		return sandbox.Container{}, classify(err, "cannot restore the sandbox's memory")
	}
	phases.Mark(ctx, "engine_restore")
	// The container's links are no longer needed: the image stays at src.
	if err := os.RemoveAll(dst); err != nil {
		r.log.WarnContext(ctx, "cannot remove a restored memory image's links", "dir", dst, "err", err)
	}
	c, err := r.Inspect(ctx, id)
	if err != nil {
		return sandbox.Container{}, err
	}
	if c.AgentAddr == "" {
		return sandbox.Container{}, sandbox.Errorf(sandbox.KindInternal, "the sandbox's container has no published agent port")
	}
	return c, nil
}

// handOver makes dst the checkpoint directory of the memory image at src:
// a reference to it where the engine's runtime (its runtime arguments
// runtimeArgs) restores by reference, so that the engine and containerd
// pass on a few bytes instead of the image (see ImageRefsArg), else links
// to its files.
func handOver(src, dst string, runtimeArgs []string) error {
	if !byReference(runtimeArgs) {
		return linkTree(src, dst)
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dst, imageRefFile), []byte(src), 0o600)
}

// DeleteMemory removes the memory image key; none is no error.
func (r *Runtime) DeleteMemory(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	dir, err := r.memoryDir(ctx)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(dir, key)); err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "cannot delete the memory image")
	}
	return nil
}

// MemoryImages returns the keys of this server's memory images.
func (r *Runtime) MemoryImages(ctx context.Context) ([]string, error) {
	dir, err := r.memoryDir(ctx)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "cannot list the memory images")
	}
	var keys []string
	for _, e := range ents {
		if e.IsDir() && validKey.MatchString(e.Name()) {
			keys = append(keys, e.Name())
		}
	}
	return keys, nil
}

// MemorySize returns the size on disk of the memory image key.
func (r *Runtime) MemorySize(ctx context.Context, key string) (int64, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	dir, err := r.memoryDir(ctx)
	if err != nil {
		return 0, err
	}
	return dirSize(filepath.Join(dir, key))
}

// linkTree makes dst a copy of the regular files directly in src, hard
// linked where it can be (the same filesystem), copied otherwise.
func linkTree(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if err := os.Link(from, to); err == nil {
			continue
		}
		if err := copyFile(from, to); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
