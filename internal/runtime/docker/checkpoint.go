package docker

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/moby/moby/api/types/checkpoint"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// checkpointName is the one checkpoint a sandbox's container keeps. The
// engine stores it in the container's own directory, so it survives
// restarts of the server and of the engine, and removing the container
// deletes it.
const checkpointName = "warren"

// Checkpoint saves a container's processes and memory to disk and stops
// it. It needs the engine in experimental mode and a runtime that can
// checkpoint (runsc). A frozen container is checkpointed as it is, then
// thawed so that it exits: gVisor finishes exiting only once unfrozen, and
// runs no user code in between.
func (r *Runtime) Checkpoint(ctx context.Context, id string) error {
	in, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return classify(err, "cannot inspect the sandbox's container")
	}
	if in.Container.State == nil || !in.Container.State.Running {
		return sandbox.Errorf(sandbox.KindConflict, "the sandbox's container is not running")
	}
	paused := in.Container.State.Paused
	// A checkpoint left by an earlier, failed or already restored run
	// would make the engine refuse the name.
	if err := r.DeleteCheckpoint(ctx, id); err != nil {
		return err
	}
	if _, err := r.cli.CheckpointCreate(ctx, id, client.CheckpointCreateOptions{CheckpointID: checkpointName, Exit: true}); err != nil {
		return classify(err, "cannot checkpoint the sandbox's container")
	}
	if paused {
		if err := r.Thaw(ctx, id); err != nil && sandbox.KindOf(err) != sandbox.KindConflict {
			return err
		}
	}
	return r.waitStopped(ctx, id, 30*time.Second)
}

// waitStopped waits until a container no longer runs.
func (r *Runtime) waitStopped(ctx context.Context, id string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		res, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			return classify(err, "cannot inspect the sandbox's container")
		}
		if st := res.Container.State; st == nil || !st.Running {
			return nil
		}
		select {
		case <-ctx.Done():
			return sandbox.Errorf(sandbox.KindInternal, "the sandbox's container still runs %s after its checkpoint", limit)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Restore starts a container from its checkpoint and deletes the
// checkpoint. A container without one is KindNotFound, like a missing
// container: the caller can tell them apart with Inspect.
func (r *Runtime) Restore(ctx context.Context, id string) (sandbox.Container, error) {
	r.markRestore(ctx, id)
	if _, err := r.cli.ContainerStart(ctx, id, client.ContainerStartOptions{CheckpointID: checkpointName}); err != nil {
		return sandbox.Container{}, classify(err, "cannot restore the sandbox's container")
	}
	c, err := r.Inspect(ctx, id)
	if err != nil {
		return sandbox.Container{}, err
	}
	if c.AgentAddr == "" {
		return sandbox.Container{}, sandbox.Errorf(sandbox.KindInternal, "the sandbox's container has no published agent port")
	}
	if err := r.DeleteCheckpoint(ctx, id); err != nil {
		r.log.WarnContext(ctx, "cannot delete a restored checkpoint", logkey.Container, id, "err", err)
	}
	return c, nil
}

// markRestore writes a file of this moment into container id's
// checkpoint. The engine uploads a checkpoint to containerd as a tar named
// by its digest, and the tar containerd made of the same files when the
// checkpoint was taken may still be in its store until its garbage
// collection: an upload of identical content then fails ("already
// exists") and the sandbox restarts without its memory. A server not on
// the engine's host cannot write it, and restores as before.
func (r *Runtime) markRestore(ctx context.Context, id string) {
	in, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return
	}
	root, err := r.DataRoot(ctx)
	if err != nil {
		return
	}
	dir := filepath.Join(root, "containers", in.Container.ID, "checkpoints", checkpointName)
	if _, err := os.Stat(dir); err != nil {
		return
	}
	stamp := []byte(strconv.FormatInt(time.Now().UnixNano(), 10))
	if err := os.WriteFile(filepath.Join(dir, "warren-restore"), stamp, 0o600); err != nil {
		r.log.WarnContext(ctx, "cannot mark a checkpoint's restore", logkey.Container, id, "err", err)
	}
}

// DeleteCheckpoint removes a container's checkpoint; none is no error.
func (r *Runtime) DeleteCheckpoint(ctx context.Context, id string) error {
	list, err := r.cli.CheckpointList(ctx, id, client.CheckpointListOptions{})
	if err != nil {
		return classify(err, "cannot list the sandbox's checkpoints")
	}
	if !slices.ContainsFunc(list.Items, func(c checkpoint.Summary) bool { return c.Name == checkpointName }) {
		return nil
	}
	_, err = r.cli.CheckpointRemove(ctx, id, client.CheckpointRemoveOptions{CheckpointID: checkpointName})
	return classify(err, "cannot delete the sandbox's checkpoint")
}

// CheckRuntime checks that the engine can run containers under rt: for
// gVisor, that runsc is registered under Config.GVisorRuntime and that the
// engine is in experimental mode (needed to checkpoint). It says how to
// fix what is missing.
func (r *Runtime) CheckRuntime(ctx context.Context, rt sandbox.OCIRuntime) error {
	if rt != sandbox.RuntimeGVisor {
		return nil
	}
	info, err := r.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return classify(err, "docker engine unreachable")
	}
	if _, ok := info.Info.Runtimes[r.cfg.GVisorRuntime]; !ok {
		return fmt.Errorf("the Docker engine has no runtime %q (it has %v): run \"warren runtime setup gvisor\" and restart the engine",
			r.cfg.GVisorRuntime, runtimeNames(info.Info.Runtimes))
	}
	if !info.Info.ExperimentalBuild {
		return fmt.Errorf("the Docker engine is not in experimental mode, which checkpoints need: " +
			"run \"warren runtime setup gvisor\" (it sets \"experimental\": true in daemon.json) and restart the engine")
	}
	return nil
}

func runtimeNames[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// DataRoot returns the engine's data root (its DockerRootDir), under which
// it keeps every container's checkpoints.
func (r *Runtime) DataRoot(ctx context.Context) (string, error) {
	info, err := r.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "", classify(err, "docker engine unreachable")
	}
	return info.Info.DockerRootDir, nil
}

// CheckpointSize returns the size on disk of a container's checkpoints
// (dataRoot/containers/id/checkpoints); id is the container's full ID. It
// reads the host's filesystem, so it only works on the engine's host, as
// root.
func CheckpointSize(dataRoot, id string) (int64, error) {
	return dirSize(filepath.Join(dataRoot, "containers", id, "checkpoints"))
}

// CheckpointsSize adds up the size on disk of the checkpoints of the given
// containers. It reads the host's filesystem, so it only works on the
// engine's host, as root.
func (r *Runtime) CheckpointsSize(ctx context.Context, containerIDs []string) (int64, error) {
	if len(containerIDs) == 0 {
		return 0, nil
	}
	root, err := r.DataRoot(ctx)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, id := range containerIDs {
		n, err := CheckpointSize(root, id)
		total += n
		// A checkpoint deleted since the caller looked is no error.
		if err != nil && !os.IsNotExist(err) {
			return total, err
		}
	}
	return total, nil
}

// CheckpointDiskUsage adds up the size of every checkpoint under the
// engine's data root (dataRoot/containers/*/checkpoints). It reads the
// host's filesystem, so it only works on the engine's host, as root.
func CheckpointDiskUsage(dataRoot string) (bytes int64, count int, err error) {
	dirs, err := filepath.Glob(filepath.Join(dataRoot, "containers", "*", "checkpoints", "*"))
	if err != nil {
		return 0, 0, err
	}
	for _, d := range dirs {
		count++
		n, err := dirSize(d)
		bytes += n
		// A checkpoint deleted while we walk it is no error.
		if err != nil && !os.IsNotExist(err) {
			return bytes, count, err
		}
	}
	return bytes, count, nil
}

// dirSize adds up the sizes of the regular files under dir. On an error it
// returns what it had counted so far.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			fi, err := e.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}
