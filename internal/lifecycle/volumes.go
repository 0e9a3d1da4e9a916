package lifecycle

import (
	"context"

	"github.com/warrenhq/warren/internal/sandbox"
)

// VolumeUse is a live sandbox that mounts a volume, and where.
type VolumeUse struct {
	SandboxID string `json:"sandboxId"`
	Path      string `json:"path"`
}

// VolumeUses maps each of a team's volumes that a running or paused
// sandbox mounts to those sandboxes, oldest first.
func (m *Manager) VolumeUses(ctx context.Context, team string) (map[string][]VolumeUse, error) {
	sbs, _, err := m.List(ctx, ListRequest{TeamID: team})
	if err != nil {
		return nil, err
	}
	uses := map[string][]VolumeUse{}
	for _, sb := range sbs {
		for _, vm := range sb.VolumeMounts {
			uses[vm.VolumeID] = append(uses[vm.VolumeID], VolumeUse{SandboxID: sb.ID, Path: vm.Path})
		}
	}
	return uses, nil
}

// VolumeUnused returns a conflict while a running or paused sandbox
// mounts the volume: deleting it would leave the mount pointing at
// nothing and a resume failing.
func (m *Manager) VolumeUnused(ctx context.Context, team, volumeID string) error {
	uses, err := m.VolumeUses(ctx, team)
	if err != nil {
		return err
	}
	if u := uses[volumeID]; len(u) > 0 {
		return sandbox.Errorf(sandbox.KindConflict, "volume %q is mounted by sandbox %s; kill it first", volumeID, u[0].SandboxID)
	}
	return nil
}
