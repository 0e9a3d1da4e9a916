package lifecycle

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Snapshot saves a running or paused sandbox's filesystem as an image the
// team can create sandboxes from. The sandbox keeps running.
func (m *Manager) Snapshot(ctx context.Context, teamID, id, name string) (sandbox.Snapshot, error) {
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
	sn := sandbox.Snapshot{
		ID:        sandbox.NewSnapshotID(),
		TeamID:    teamID,
		SandboxID: id,
		Name:      name,
		CreatedAt: time.Now().UTC(),
		AgentArgs: slices.Clone(sb.AgentArgs),
	}
	sn.Image, err = m.caps.committer.Commit(ctx, sb.ContainerID, sandbox.SnapshotRepo+":"+sn.ID)
	if err != nil {
		return sandbox.Snapshot{}, sandbox.Wrap(sandbox.KindInternal, err, "failed to snapshot sandbox")
	}
	if err := m.cfg.Store.PutSnapshot(ctx, sn); err != nil {
		m.removeImage(ctx, sn.Image)
		return sandbox.Snapshot{}, err
	}
	m.event(ctx, id, "info", "snapshot created", "snapshot", sn.ID)
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

// DeleteSnapshot deletes a team's snapshot and its image. Sandboxes
// created from it keep running; the engine keeps the image's layers until
// they are gone.
func (m *Manager) DeleteSnapshot(ctx context.Context, teamID, id string) error {
	sn, err := m.cfg.Store.GetSnapshot(ctx, strings.TrimSuffix(id, ":default"))
	if err != nil || sn.TeamID != teamID {
		return sandbox.Errorf(sandbox.KindNotFound, "snapshot '%s' not found", id)
	}
	if err := m.cfg.Store.DeleteSnapshot(ctx, sn.ID); err != nil {
		return err
	}
	m.releaseImage(ctx, sn.Image)
	return nil
}

// forkParallelism bounds the sandboxes one fork creates at once.
const forkParallelism = 4

// ForkResult is one sandbox of a fork, or why it could not be made.
type ForkResult struct {
	Sandbox sandbox.Sandbox
	Err     error
}

// Fork commits a running or paused sandbox and creates count sandboxes
// from the image, each running for timeout. A failure of one fork is
// reported in its result; the others go on.
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
	commitCtx, cancel := engineWork(ctx, changeLimit)
	image, err := m.caps.committer.Commit(commitCtx, src.ContainerID, sandbox.ForkRepo+":"+sandbox.NewID())
	cancel()
	unlock()
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "failed to fork sandbox")
	}
	req := CreateRequest{
		TeamID:    teamID,
		Timeout:   timeout,
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
	tpl := template{id: src.TemplateID, alias: src.Alias, image: image, agentArgs: src.AgentArgs}
	out := make([]ForkResult, count)
	var wg sync.WaitGroup
	sem := make(chan struct{}, forkParallelism)
	for i := range out {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			sb, err := m.create(ctx, req, tpl)
			out[i] = ForkResult{Sandbox: sb, Err: err}
		})
	}
	wg.Wait()
	if !slices.ContainsFunc(out, func(r ForkResult) bool { return r.Err == nil }) {
		m.removeImage(ctx, image)
	}
	return out, nil
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
