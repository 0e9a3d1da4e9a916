package lifecycle

import (
	"context"
	"strings"
	"sync"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/phases"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Forks and snapshots that keep memory. Under gVisor, on an engine that
// is a sandbox.MemoryCloner, a running (or frozen) sandbox is frozen for
// a moment, its processes and memory saved as a memory image and its
// filesystem at that same instant (committed, or for a fork copied into
// the memory image where the engine is a sandbox.FileCopier), then
// thawed: it goes on with its ID, expiry and connections. A sandbox
// paused to disk with its memory (checkpointed) gives its checkpoint and
// stays paused. A fork's sandboxes, and those created from a memory
// snapshot, are restored from the image into containers of their own
// (own ID, hostname, address, egress rules, tokens, and a copy of the
// filesystem): the processes, memory and listening sockets go on in each;
// connections to the outside do not.
//
// Elsewhere (runc, Kubernetes, a sandbox paused without its memory) only
// the filesystem can be carried. An explicit request for memory is then
// refused (E2B's rule: never silently downgraded); a fork, which has no
// such flag, and a snapshot that did not ask, carry the filesystem and
// say so in the sandbox's log and its lifecycle event.

// MemoryRequest is what a client asked of a snapshot's memory.
type MemoryRequest int

const (
	// MemoryIfPossible keeps memory where the sandbox's runtime can,
	// else the filesystem only, said in the log.
	MemoryIfPossible MemoryRequest = iota
	// MemoryRequired keeps memory or refuses (KindInvalid).
	MemoryRequired
	// MemoryNone keeps the filesystem only.
	MemoryNone
)

// forkKeyPrefix starts the keys of forks' memory images, which live only
// as long as their fork: any found with no fork in flight is a leftover.
const forkKeyPrefix = "fork-"

// memoryFlights holds the keys of memory images, and the fork images,
// being made or used by a fork or a snapshot in flight, which
// pruneMemory and pruneForks must leave alone.
type memoryFlights struct {
	mu   sync.Mutex
	keys map[string]struct{} // guarded by mu
}

func (f *memoryFlights) begin(key string) (done func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[string]struct{}{}
	}
	f.keys[key] = struct{}{}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.keys, key)
	}
}

func (f *memoryFlights) has(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.keys[key]
	return ok
}

// whyNoMemory returns why sb's memory cannot be captured now, or "" when
// it can.
func (m *Manager) whyNoMemory(sb sandbox.Sandbox) string {
	switch {
	case m.caps.memory == nil:
		return "this server's engine cannot capture a sandbox's memory (forks and snapshots with memory need the Docker engine with the gVisor runtime)"
	case sb.Runtime != sandbox.RuntimeGVisor:
		return "the sandbox runs under runc, which cannot capture its memory: forks and snapshots with memory need the gVisor runtime (serve --runtime gvisor, or a template labelled " + sandbox.LabelRuntime + "=gvisor)"
	case sb.State == sandbox.StatePaused && sb.PauseMode == sandbox.PauseStopped:
		return "the sandbox is paused without its memory (stopped)"
	}
	return ""
}

// capture saves sb's filesystem as the image ref and, when memoryKey is
// not "", its processes and memory as the memory image memoryKey, both at
// one instant: a running sandbox is frozen meanwhile and thawed after. The
// caller holds sb's lock and has checked whyNoMemory. When the memory
// cannot be saved, capture fails if required, else it saves the
// filesystem alone and returns why in lost. With copyFiles (a fork's
// capture: its image is not kept), the filesystem goes into the memory
// image instead where the engine can (sandbox.FileCopier), and the image
// returned is sb's own.
func (m *Manager) capture(ctx context.Context, sb sandbox.Sandbox, ref, memoryKey string, required, copyFiles bool) (image, lost string, err error) {
	if memoryKey == "" {
		image, err = m.caps.committer.Commit(ctx, sb.ContainerID, ref)
		return image, "", err
	}
	ctx, trace := phases.Start(ctx)
	defer func() {
		if err == nil && lost == "" {
			m.createPhases.Observe("capture", trace)
			m.log.Info("sandbox captured with its memory", logkey.Sandbox, sb.ID, "phases", trace.String())
		}
	}()
	if sb.State == sandbox.StateRunning {
		if err := m.caps.freeze(ctx, sb.ContainerID); err != nil {
			return "", "", err
		}
		phases.Mark(ctx, "freeze")
		defer func() {
			if err := m.caps.thaw(context.WithoutCancel(ctx), sb.ContainerID); err != nil {
				m.log.Error("cannot thaw a sandbox after capturing its memory", logkey.Sandbox, sb.ID, "err", err)
			}
			phases.Mark(ctx, "thaw")
		}()
	}
	if serr := m.caps.memory.SaveMemory(ctx, sb.ContainerID, memoryKey); serr != nil {
		if required {
			return "", "", serr
		}
		m.log.Warn("cannot save a sandbox's memory; saving its filesystem only", logkey.Sandbox, sb.ID, "err", serr)
		image, err = m.caps.committer.Commit(ctx, sb.ContainerID, ref)
		return image, "its memory could not be saved (" + sandbox.Message(serr) + ")", err
	}
	phases.Mark(ctx, "memory_save")
	if copyFiles && m.caps.files != nil {
		ferr := m.caps.files.SaveFiles(ctx, sb.ContainerID, memoryKey)
		if ferr == nil {
			phases.Mark(ctx, "files_save")
			return sb.Image, "", nil
		}
		if sandbox.KindOf(ferr) != sandbox.KindUnavailable {
			m.deleteMemory(ctx, memoryKey)
			return "", "", ferr
		}
		m.log.Info("committing a sandbox's files instead of copying them", logkey.Sandbox, sb.ID, "why", ferr)
	}
	image, err = m.caps.committer.Commit(ctx, sb.ContainerID, ref)
	if err != nil {
		m.deleteMemory(ctx, memoryKey)
		return "", "", err
	}
	phases.Mark(ctx, "commit")
	return image, "", nil
}

func (m *Manager) deleteMemory(ctx context.Context, key string) {
	if err := m.caps.memory.DeleteMemory(context.WithoutCancel(ctx), key); err != nil {
		m.log.Warn("cannot delete a memory image", "key", key, "err", err)
	}
}

// pruneMemory deletes the memory images no snapshot and no fork in flight
// holds: a fork's, left by a server killed during it, or a deleted
// snapshot's.
func (m *Manager) pruneMemory(ctx context.Context) {
	if m.caps.memory == nil {
		return
	}
	keys, err := m.caps.memory.MemoryImages(ctx)
	if err != nil {
		m.log.Warn("cannot list memory images", "err", err)
		return
	}
	for _, key := range keys {
		if m.memoryFlights.has(key) {
			continue
		}
		if !strings.HasPrefix(key, forkKeyPrefix) {
			sn, err := m.cfg.Store.GetSnapshot(ctx, key)
			if err == nil && sn.Memory != nil || err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
				continue // a memory snapshot's, or the store cannot tell
			}
		}
		m.log.Info("deleting a memory image no snapshot or fork holds", "key", key)
		m.deleteMemory(ctx, key)
	}
}

// pruneForks removes this server's fork images that no fork in flight and
// no sandbox that may still run uses: those of a fork whose server was
// killed between its commit and its sandboxes.
func (m *Manager) pruneForks(ctx context.Context) {
	if m.caps.forks == nil {
		return
	}
	refs, err := m.caps.forks.ForkImages(ctx)
	if err != nil {
		m.log.Warn("cannot list fork images", "err", err)
		return
	}
	for _, ref := range refs {
		if !m.memoryFlights.has(ref) {
			m.releaseImage(ctx, ref)
		}
	}
}
