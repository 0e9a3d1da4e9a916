package fake

import (
	"context"

	"github.com/warrenhq/warren/internal/sandbox"
)

// watch is one WatchContainers subscription.
type watch struct {
	ch   chan sandbox.ContainerEvent
	done <-chan struct{} // the subscriber's context's
}

// ReportEvents makes the runtime send container events to its watchers,
// as an engine does: Stop, Remove, Freeze, Thaw and Checkpoint send them
// for Warren's operations, Kill and Vanish for changes behind its back.
// Off by default, so that tests counting runtime calls are not disturbed
// by the inspections the events trigger.
func (r *Runtime) ReportEvents() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = true
}

// WatchContainers subscribes to container events until ctx ends or
// BreakWatches; with ReportEvents off, none come.
func (r *Runtime) WatchContainers(ctx context.Context) (<-chan sandbox.ContainerEvent, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("WatchContainers", ""); err != nil {
		return nil, err
	}
	w := &watch{ch: make(chan sandbox.ContainerEvent, 64), done: ctx.Done()}
	r.watches[w] = struct{}{}
	context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.endWatchLocked(w)
	})
	return w.ch, nil
}

// BreakWatches ends every subscription, as an engine restart does.
func (r *Runtime) BreakWatches() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for w := range r.watches {
		r.endWatchLocked(w)
	}
}

// Watchers returns how many subscriptions are open.
func (r *Runtime) Watchers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.watches)
}

func (r *Runtime) endWatchLocked(w *watch) {
	if _, ok := r.watches[w]; ok {
		delete(r.watches, w)
		close(w.ch)
	}
}

// emitLocked sends an event to every watcher, waiting for room in each
// one's buffer as an engine's stream would. The caller holds r.mu.
func (r *Runtime) emitLocked(id string, a sandbox.ContainerAction) {
	if !r.events {
		return
	}
	for w := range r.watches {
		select {
		case w.ch <- sandbox.ContainerEvent{ContainerID: id, Action: a}:
		case <-w.done:
		}
	}
}

// Kill stops a container behind Warren's back, as docker kill does.
func (r *Runtime) Kill(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.containers[id]; ok && c.Running {
		c.Running, c.Paused, c.AgentAddr = false, false, ""
		r.emitLocked(id, sandbox.ContainerDied)
	}
}

// Vanish removes a container behind Warren's back, as docker rm -f does.
func (r *Runtime) Vanish(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removeLocked(id)
}

// removeLocked deletes a container with its events. The caller holds r.mu.
func (r *Runtime) removeLocked(id string) {
	c, ok := r.containers[id]
	if !ok {
		return
	}
	if c.Running {
		r.emitLocked(id, sandbox.ContainerDied)
	}
	delete(r.containers, id)
	delete(r.limits, id)
	delete(r.agentArgs, id)
	delete(r.runtimes, id)
	delete(r.checkpoints, id)
	r.emitLocked(id, sandbox.ContainerDestroyed)
}
