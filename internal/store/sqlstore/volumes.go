package sqlstore

import (
	"context"
	"fmt"

	"github.com/warrenhq/warren/internal/sandbox"
)

// PutVolume inserts a volume; a second volume of the same name in a team
// is a conflict.
func (s *Store) PutVolume(ctx context.Context, v sandbox.Volume) error {
	_, err := s.db.Exec(ctx, `INSERT INTO volumes (`+volumeColumns+`) VALUES ($1, $2, $3, $4)`,
		v.ID, v.TeamID, v.Name, unixNano(v.CreatedAt))
	if s.dialect.Unique(err, UniqueVolumeName) {
		return sandbox.Errorf(sandbox.KindConflict, "volume with name %q already exists", v.Name)
	}
	if err != nil {
		return fmt.Errorf("put volume %s: %w", v.ID, err)
	}
	return nil
}

const volumeColumns = `id, team_id, name, created_at`

func scanVolume(row Row) (sandbox.Volume, error) {
	var v sandbox.Volume
	var created int64
	if err := row.Scan(&v.ID, &v.TeamID, &v.Name, &created); err != nil {
		return sandbox.Volume{}, err
	}
	v.CreatedAt = fromUnixNano(created)
	return v, nil
}

// GetVolume returns a volume by ID.
func (s *Store) GetVolume(ctx context.Context, id string) (sandbox.Volume, error) {
	v, err := scanVolume(s.db.QueryRow(ctx, `SELECT `+volumeColumns+` FROM volumes WHERE id = $1`, id))
	if err != nil {
		return sandbox.Volume{}, notFound(err, "volume")
	}
	return v, nil
}

// ListVolumes returns a team's volumes, oldest first.
func (s *Store) ListVolumes(ctx context.Context, teamID string) ([]sandbox.Volume, error) {
	return s.listVolumes(ctx, `WHERE team_id = $1`, teamID)
}

// ListAllVolumes returns every team's volumes, oldest first.
func (s *Store) ListAllVolumes(ctx context.Context) ([]sandbox.Volume, error) {
	return s.listVolumes(ctx, ``)
}

func (s *Store) listVolumes(ctx context.Context, where string, args ...any) ([]sandbox.Volume, error) {
	out, err := collect(ctx, s.db, scanVolume, `SELECT `+volumeColumns+` FROM volumes `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	return out, nil
}

// DeleteVolume removes a volume's record.
func (s *Store) DeleteVolume(ctx context.Context, id string) error {
	return changeOne(ctx, s.db, "delete volume "+id, "volume not found", `DELETE FROM volumes WHERE id = $1`, id)
}
