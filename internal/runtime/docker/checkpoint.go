package docker

import (
	"context"
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/moby/moby/api/types/checkpoint"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// checkpointName is the one checkpoint a sandbox's container keeps. The
// engine stores it in the container's own directory, so it survives
// restarts of the server and of the engine, and removing the container
// deletes it. checkpointRefName is the checkpoint a restore by reference
// starts the container from: a directory naming checkpointName's (see
// ImageRefsArg), there only during the restore.
const (
	checkpointName    = "warren"
	checkpointRefName = "warren-ref"
)

// Checkpoint saves a container's processes and memory to disk and stops
// it. It needs a runtime that can checkpoint (runsc). The container's own
// runsc writes the checkpoint straight into the engine's checkpoint
// directory where this host's /proc shows it (see runsc.go); else the
// engine checkpoints it, in experimental mode, through containerd's tar.
// A frozen container is checkpointed as it is, then thawed so that it
// exits: gVisor finishes exiting only once unfrozen, and runs no user
// code in between.
func (r *Runtime) Checkpoint(ctx context.Context, id string) error {
	in, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return classify(err, "cannot inspect the sandbox's container")
	}
	st := in.Container.State
	if st == nil || !st.Running {
		return sandbox.Errorf(sandbox.KindConflict, "the sandbox's container is not running")
	}
	// A checkpoint left by an earlier, failed or already restored run
	// would make the engine refuse the name.
	if err := r.DeleteCheckpoint(ctx, id); err != nil {
		return err
	}
	if err := r.checkpointExit(ctx, in.Container.ID, st.Pid); err != nil {
		return err
	}
	if st.Paused {
		if err := r.Thaw(ctx, id); err != nil && sandbox.KindOf(err) != sandbox.KindConflict {
			return err
		}
	}
	return r.waitStopped(ctx, id, 30*time.Second)
}

// checkpointExit checkpoints running container id, whose sandbox process
// is pid, as checkpointName, letting it exit.
func (r *Runtime) checkpointExit(ctx context.Context, id string, pid int) error {
	if _, _, ok := runscOf("/proc", pid); ok {
		root, err := r.DataRoot(ctx)
		if err != nil {
			return err
		}
		dir := filepath.Join(root, "containers", id, "checkpoints")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return sandbox.Wrap(sandbox.KindInternal, err, "cannot make the container's checkpoint directory")
		}
		if done, err := checkpointInPlace(ctx, id, pid, filepath.Join(dir, checkpointName), false); done || err != nil {
			return err
		}
	}
	_, err := r.cli.CheckpointCreate(ctx, id, client.CheckpointCreateOptions{CheckpointID: checkpointName, Exit: true})
	return classify(err, "cannot checkpoint the sandbox's container")
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
// container: the caller can tell them apart with Inspect. Where the
// engine's runtime restores by reference, the engine is handed a
// reference to the checkpoint (checkpointRefName) instead of the
// checkpoint itself, which it would tar into containerd and containerd
// unpack again for runsc.
func (r *Runtime) Restore(ctx context.Context, id string) (sandbox.Container, error) {
	in, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return sandbox.Container{}, classify(err, "cannot inspect the sandbox's container")
	}
	info, err := r.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return sandbox.Container{}, classify(err, "docker engine unreachable")
	}
	dir := filepath.Join(info.Info.DockerRootDir, "containers", in.Container.ID, "checkpoints")
	if _, err := os.Stat(filepath.Join(dir, checkpointName)); err != nil {
		return sandbox.Container{}, sandbox.Errorf(sandbox.KindNotFound, "the sandbox's container has no checkpoint")
	}
	name := checkpointName
	if byReference(info.Info.Runtimes[r.cfg.GVisorRuntime].Args) {
		name = checkpointRefName
		defer os.RemoveAll(filepath.Join(dir, name))
		if err := handOver(filepath.Join(dir, checkpointName), filepath.Join(dir, name), info.Info.Runtimes[r.cfg.GVisorRuntime].Args); err != nil {
			return sandbox.Container{}, sandbox.Wrap(sandbox.KindInternal, err, "cannot hand the checkpoint to the container")
		}
	}
	if err := markRestore(filepath.Join(dir, name)); err != nil {
		return sandbox.Container{}, err
	}
	if _, err := r.cli.ContainerStart(ctx, id, client.ContainerStartOptions{CheckpointID: name}); err != nil {
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

// markRestore adds a file of its own to the checkpoint in dir before the
// engine restores it. The engine uploads a checkpoint to containerd as one
// blob named by its digest, and the upload fails ("already exists",
// moby/moby#42900) while containerd still holds a blob of the same bytes:
// the checkpoint's own, kept until its garbage collector runs (a restore
// right after a checkpoint, under load), or another restore's of the same
// image at that moment. The file makes every upload's bytes its own.
func markRestore(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "warren-restore"), []byte(rand.Text()), 0o600); err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "cannot prepare the sandbox's checkpoint for its restore")
	}
	return nil
}

// DeleteCheckpoint removes a container's checkpoint, and the reference
// to it a restore may have left; none is no error.
func (r *Runtime) DeleteCheckpoint(ctx context.Context, id string) error {
	list, err := r.cli.CheckpointList(ctx, id, client.CheckpointListOptions{})
	if err != nil {
		return classify(err, "cannot list the sandbox's checkpoints")
	}
	for _, name := range []string{checkpointRefName, checkpointName} {
		if !slices.ContainsFunc(list.Items, func(c checkpoint.Summary) bool { return c.Name == name }) {
			continue
		}
		if _, err := r.cli.CheckpointRemove(ctx, id, client.CheckpointRemoveOptions{CheckpointID: name}); err != nil {
			return classify(err, "cannot delete the sandbox's checkpoint")
		}
	}
	return nil
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
// it keeps every container's checkpoints. It asks the engine once: the
// data root is fixed while the engine runs, and Info, which reports it,
// costs tens of milliseconds on a loaded engine, on the path of every
// capture and restore.
func (r *Runtime) DataRoot(ctx context.Context) (string, error) {
	r.mu.Lock()
	root := r.dataRoot
	r.mu.Unlock()
	if root != "" {
		return root, nil
	}
	info, err := r.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "", classify(err, "docker engine unreachable")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dataRoot = info.Info.DockerRootDir
	return r.dataRoot, nil
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
