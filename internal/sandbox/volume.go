package sandbox

import (
	"context"
	"regexp"
	"time"
)

// Volume is a team's named directory tree that outlives sandboxes. Its
// content lives with the volume package; the store keeps the record.
type Volume struct {
	ID        string
	TeamID    string
	Name      string
	CreatedAt time.Time
}

// NewVolumeID returns a random volume ID.
func NewVolumeID() string { return "v" + randomLower() }

var volumeName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// ValidateVolumeName checks a volume name against E2B's pattern
// ^[a-zA-Z0-9_-]+$, with a length bound of our own.
func ValidateVolumeName(name string) error {
	if len(name) > 128 || !volumeName.MatchString(name) {
		return Errorf(KindInvalid, "invalid volume name %q: must match ^[a-zA-Z0-9_-]+$ and be at most 128 characters", name)
	}
	return nil
}

// VolumeStore keeps volume records. Methods return KindNotFound for a
// missing record; PutVolume returns KindConflict when the team already
// has a volume of that name.
type VolumeStore interface {
	PutVolume(ctx context.Context, v Volume) error
	GetVolume(ctx context.Context, id string) (Volume, error)
	// ListVolumes returns a team's volumes, oldest first.
	ListVolumes(ctx context.Context, teamID string) ([]Volume, error)
	// ListAllVolumes returns every team's volumes, oldest first: for the
	// server's own bookkeeping and the operator's dashboard, never for a
	// team's API call.
	ListAllVolumes(ctx context.Context) ([]Volume, error)
	DeleteVolume(ctx context.Context, id string) error
}
