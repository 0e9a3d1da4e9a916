package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/phases"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Snapshot saves a running or paused sandbox's filesystem as an image the
// team can create sandboxes from and, as memory asks and the sandbox's
// runtime can (see memory.go), its processes and memory, which sandboxes
// created from the snapshot then go on with. The sandbox keeps running.
func (m *Manager) Snapshot(ctx context.Context, teamID, id, name string, memory MemoryRequest) (sandbox.Snapshot, error) {
	ctx, cancel := engineWork(ctx, changeLimit)
	defer cancel()
	defer m.locks.lock(id)()
	sb, err := m.live(teamID, id)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	if m.caps.committer == nil {
		return sandbox.Snapshot{}, errNoCommit
	}
	why := m.whyNoMemory(sb)
	if why == "" && len(sb.VolumeMounts) > 0 {
		why = "the sandbox has volumes mounted, which a sandbox created from a snapshot does not"
	}
	if memory == MemoryRequired && why != "" {
		return sandbox.Snapshot{}, sandbox.Errorf(sandbox.KindInvalid, "cannot snapshot the sandbox with its memory: %s; ask for memory: false to save its filesystem only", why)
	}
	sn := sandbox.Snapshot{
		ID:        sandbox.NewSnapshotID(),
		TeamID:    teamID,
		SandboxID: id,
		Name:      name,
		CreatedAt: time.Now().UTC(),
		AgentArgs: slices.Clone(sb.AgentArgs),
	}
	var key string
	if memory != MemoryNone && why == "" {
		key = sn.ID
		defer m.memoryFlights.begin(key)()
		sn.Memory = &sandbox.AgentIdentity{AgentSecret: sb.AgentSecret, AccessToken: sb.EnvdAccessToken}
	}
	start := time.Now()
	var lost string
	sn.Image, lost, err = m.capture(ctx, sb, sandbox.SnapshotRepo+":"+sn.ID, key, memory == MemoryRequired, false)
	if err != nil {
		return sandbox.Snapshot{}, sandbox.Wrap(sandbox.KindInternal, err, "failed to snapshot sandbox")
	}
	if lost != "" {
		m.deleteMemory(ctx, key)
		key, sn.Memory, why = "", nil, lost
	}
	if err := m.cfg.Store.PutSnapshot(ctx, sn); err != nil {
		m.removeImage(ctx, sn.Image)
		if key != "" {
			m.deleteMemory(ctx, key)
		}
		return sandbox.Snapshot{}, err
	}
	took := time.Since(start).Round(time.Millisecond).String()
	switch {
	case key != "":
		m.event(ctx, id, "info", "snapshot created with memory", "snapshot", sn.ID, "memory", "true", "took", took)
	case memory == MemoryNone:
		m.event(ctx, id, "info", "snapshot created (filesystem only, as asked)", "snapshot", sn.ID, "memory", "false", "took", took)
	default:
		m.event(ctx, id, "info", "snapshot created (filesystem only: "+why+")", "snapshot", sn.ID, "memory", "false", "took", took)
	}
	return sn, nil
}

// Snapshots lists the team's snapshots, optionally those of one sandbox
// or with one name.
func (m *Manager) Snapshots(ctx context.Context, teamID, sandboxID, name string) ([]sandbox.Snapshot, error) {
	all, err := m.cfg.Store.ListSnapshots(ctx, teamID, sandboxID)
	if err != nil {
		return nil, err
	}
	if name == "" {
		return all, nil
	}
	var out []sandbox.Snapshot
	for _, sn := range all {
		if sn.Name == name {
			out = append(out, sn)
		}
	}
	return out, nil
}

// DeleteSnapshot deletes a team's snapshot, its memory image and its
// image. Sandboxes created from it keep running; the engine keeps the
// image's layers until they are gone.
func (m *Manager) DeleteSnapshot(ctx context.Context, teamID, id string) error {
	sn, err := m.cfg.Store.GetSnapshot(ctx, strings.TrimSuffix(id, ":default"))
	if err != nil || sn.TeamID != teamID {
		return sandbox.Errorf(sandbox.KindNotFound, "snapshot '%s' not found", id)
	}
	if err := m.cfg.Store.DeleteSnapshot(ctx, sn.ID); err != nil {
		return err
	}
	if sn.Memory != nil && m.caps.memory != nil {
		m.deleteMemory(ctx, sn.ID)
	}
	m.releaseImage(ctx, sn.Image)
	return nil
}

// ForkResult is one sandbox of a fork, or why it could not be made.
type ForkResult struct {
	Sandbox sandbox.Sandbox
	Err     error
}

// Fork captures a running or paused sandbox (see capture: with its
// memory where its runtime can, else its filesystem only) and creates
// count sandboxes from it, each running for timeout. A failure of one
// fork is reported in its result; the others go on. Each fork's log says
// whether it carries its source's memory (a "memory" field, and why not).
//
// Where the forks will run their source's own image (its memory kept, its
// files copied with it: a sandbox.FileCopier), their containers are
// created while the source is captured, and restored once it is: the
// engine's create (~0.1-0.3 s under load) is then off the fork's path. A
// capture that commits or loses the memory after all leaves those
// containers for new ones of the right kind.
func (m *Manager) Fork(ctx context.Context, teamID, id string, timeout time.Duration, count int) ([]ForkResult, error) {
	if err := m.checkTimeout(timeout); err != nil {
		return nil, err
	}
	if count < 1 || count > 100 {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "count must be between 1 and 100")
	}
	unlock := m.locks.lock(id)
	src, err := m.live(teamID, id)
	if err != nil {
		unlock()
		return nil, err
	}
	if m.caps.committer == nil {
		unlock()
		return nil, errNoCommit
	}
	why := m.whyNoMemory(src)
	var key string
	if why == "" {
		key = forkKeyPrefix + sandbox.NewID()
		defer m.memoryFlights.begin(key)()
	}
	ref := sandbox.ForkRepo + ":" + sandbox.NewID()
	defer m.memoryFlights.begin(ref)()
	f := forking{m: m, src: src, teamID: teamID, timeout: timeout, out: make([]ForkResult, count), sem: make(chan struct{}, m.pool.ColdSlots())}
	early := key != "" && m.caps.files != nil
	captured := &forkCapture{done: make(chan struct{})}
	if early {
		tpl := f.template(src.Image, key)
		tpl.captured = captured.wait(src.Image)
		f.start(ctx, tpl, func(int) bool { return true }, "")
	}
	captureCtx, cancel := engineWork(ctx, changeLimit)
	image, lost, err := m.capture(captureCtx, src, ref, key, false, true)
	cancel()
	unlock()
	captured.finish(image, lost, err)
	if err != nil {
		f.wg.Wait()
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "failed to fork sandbox")
	}
	if lost != "" {
		m.deleteMemory(ctx, key)
		key, why = "", lost
	}
	if key != "" {
		defer m.deleteMemory(ctx, key)
	}
	f.wg.Wait()
	f.start(ctx, f.template(image, key), func(i int) bool { return !early || errors.Is(f.out[i].Err, errStaleFork) }, why)
	f.wg.Wait()
	// The source's own image, when the files went with the memory, stays.
	if image == ref && !slices.ContainsFunc(f.out, func(r ForkResult) bool { return r.Err == nil }) {
		m.removeImage(ctx, image)
	}
	return f.out, nil
}

// forking is the sandboxes of one fork being made.
type forking struct {
	m       *Manager
	src     sandbox.Sandbox
	teamID  string
	timeout time.Duration // of each fork
	out     []ForkResult
	wg      sync.WaitGroup
	// sem lets a fork's sandboxes go to the cold gate as many at once as
	// it lets through, no more: the rest wait here, not at the gate,
	// whose wait is bounded. Restores wait on the engine as much as they
	// compute, so more at once overlap better: 10 forks took ~6.0 s with
	// all the gate's 8 slots against ~8.3 s four at a time (load ~25, 2
	// cores).
	sem chan struct{}
}

// template returns what the fork's sandboxes run: image, restored from
// the memory image key ("" = booted afresh).
func (f *forking) template(image, key string) template {
	src := f.src
	tpl := template{id: src.TemplateID, alias: src.Alias, image: image, agentArgs: src.AgentArgs}
	if key != "" {
		// The memory image runs under gVisor whatever the server's default.
		tpl.runtime, tpl.memory = src.Runtime, key
		tpl.restored = sandbox.AgentIdentity{AgentSecret: src.AgentSecret, AccessToken: src.EnvdAccessToken}
	}
	return tpl
}

// start creates, in the background, the sandboxes of tpl in the results
// which says; whyNoMemory is what their logs say they lack.
func (f *forking) start(ctx context.Context, tpl template, which func(int) bool, whyNoMemory string) {
	src := f.src
	req := CreateRequest{
		TeamID:    f.teamID,
		Timeout:   f.timeout,
		Metadata:  src.Metadata,
		EnvVars:   src.EnvVars,
		Secure:    src.EnvdAccessToken != "",
		Lifecycle: src.Lifecycle,
		Network:   src.Network,
		IAM:       src.IAM,
		// A snapshot holds no volume (a commit leaves bind mounts out);
		// the fork mounts the same volumes as its source.
		VolumeMounts: slices.Clone(src.VolumeMounts),
	}
	for i := range f.out {
		if !which(i) {
			continue
		}
		f.wg.Go(func() {
			f.sem <- struct{}{}
			defer func() { <-f.sem }()
			// Each fork's create is traced on its own (path "memory").
			fctx, _ := phases.Start(ctx)
			sb, err := f.m.create(fctx, req, tpl)
			f.out[i] = ForkResult{Sandbox: sb, Err: err}
			if err == nil {
				f.m.reportFork(ctx, sb, src.ID, whyNoMemory)
			}
		})
	}
}

// errStaleFork is why a fork's container made during its source's capture
// was left: the capture did not give the memory image with the source's
// own image (it committed the files, or could not save the memory).
var errStaleFork = errors.New("the capture gave another image than the fork's container was made for")

// forkCapture is a fork's capture, which the forks' containers made
// meanwhile wait for.
type forkCapture struct {
	done        chan struct{} // closed once the fields below are set
	image, lost string
	err         error
}

func (c *forkCapture) finish(image, lost string, err error) {
	c.image, c.lost, c.err = image, lost, err
	close(c.done)
}

// wait returns the sandbox.MemoryCloner's ready of a container made for
// image and the fork's memory image.
func (c *forkCapture) wait(image string) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-c.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		switch {
		case c.err != nil:
			return sandbox.Wrap(sandbox.KindInternal, c.err, "the fork's source could not be captured")
		case c.lost != "" || c.image != image:
			return errStaleFork
		}
		return nil
	}
}

// reportFork says in a fork's log what it carries of its source's.
func (m *Manager) reportFork(ctx context.Context, sb sandbox.Sandbox, src, whyNoMemory string) {
	if whyNoMemory == "" {
		m.event(ctx, sb.ID, "info", "forked with its source's memory and processes", "source", src, "memory", "true")
		return
	}
	m.event(ctx, sb.ID, "warn", "forked with its source's filesystem only: "+whyNoMemory, "source", src, "memory", "false")
}

// releaseImage removes a fork image, or a deleted snapshot's image, once no
// sandbox that may still run uses it. Other images are left alone.
func (m *Manager) releaseImage(ctx context.Context, image string) {
	switch {
	case strings.HasPrefix(image, sandbox.ForkRepo+":"):
	case strings.HasPrefix(image, sandbox.SnapshotRepo+":"):
		_, err := m.cfg.Store.GetSnapshot(ctx, strings.TrimPrefix(image, sandbox.SnapshotRepo+":"))
		if sandbox.KindOf(err) != sandbox.KindNotFound {
			return // the snapshot still exists, or the store cannot tell
		}
	default:
		return
	}
	for _, sb := range m.snapshotAll() {
		if sb.Image == image && sb.State != sandbox.StateKilled {
			return
		}
	}
	m.removeImage(ctx, image)
}

func (m *Manager) removeImage(ctx context.Context, image string) {
	m.ReleasePool(ctx, image)
	err := m.cfg.Runtime.RemoveImage(context.WithoutCancel(ctx), image)
	if err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
		m.log.Warn("cannot remove image", logkey.Image, image, "err", err)
	}
}
