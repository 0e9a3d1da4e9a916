package fake

import (
	"context"

	"github.com/warrenhq/warren/internal/sandbox"
)

// RuntimeOf returns the runtime a container was created with.
func (r *Runtime) RuntimeOf(id string) (sandbox.OCIRuntime, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt, ok := r.runtimes[id]
	return rt, ok
}

// CheckpointSize is the size CheckpointsSize gives every checkpoint.
const CheckpointSize = 1 << 20

// CheckpointsSize adds up CheckpointSize for each of the containers that
// has a checkpoint.
func (r *Runtime) CheckpointsSize(ctx context.Context, containerIDs []string) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("CheckpointsSize", ""); err != nil {
		return 0, err
	}
	var n int64
	for _, id := range containerIDs {
		if _, ok := r.checkpoints[id]; ok {
			n += CheckpointSize
		}
	}
	return n, nil
}

// HasCheckpoint reports whether a container has a checkpoint.
func (r *Runtime) HasCheckpoint(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.checkpoints[id]
	return ok
}

// Checkpoint stops a running or frozen gVisor container and keeps a
// checkpoint of it; a runc container is KindInvalid, as the engine
// refuses it.
func (r *Runtime) Checkpoint(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("Checkpoint", id); err != nil {
		return err
	}
	c, ok := r.containers[id]
	if !ok {
		return notFound(id)
	}
	if r.runtimes[id] != sandbox.RuntimeGVisor {
		return sandbox.Errorf(sandbox.KindInvalid, "runtime of container %s cannot checkpoint", id)
	}
	if !c.Running {
		return sandbox.Errorf(sandbox.KindConflict, "container %s is not running", id)
	}
	r.checkpoints[id] = c.AgentAddr
	c.Running, c.Paused, c.AgentAddr = false, false, ""
	r.emitLocked(id, sandbox.ContainerDied)
	return nil
}

// Restore starts a checkpointed container on a new agent address and
// drops its checkpoint; without one it is KindNotFound.
func (r *Runtime) Restore(ctx context.Context, id string) (sandbox.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("Restore", id); err != nil {
		return sandbox.Container{}, err
	}
	c, ok := r.containers[id]
	if !ok {
		return sandbox.Container{}, notFound(id)
	}
	if _, ok := r.checkpoints[id]; !ok || c.Running {
		return sandbox.Container{}, sandbox.Errorf(sandbox.KindNotFound, "container %s has no checkpoint", id)
	}
	delete(r.checkpoints, id)
	c.Running, c.AgentAddr = true, r.addr()
	return clone(c), nil
}

// DeleteCheckpoint drops a container's checkpoint.
func (r *Runtime) DeleteCheckpoint(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("DeleteCheckpoint", id); err != nil {
		return err
	}
	if _, ok := r.containers[id]; !ok {
		return notFound(id)
	}
	delete(r.checkpoints, id)
	return nil
}
