package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/warrenhq/warren/internal/sandbox"
)

var _ sandbox.VolumeStore = (*DB)(nil)

// PutVolume inserts a volume; a second volume of the same name in a team
// is a conflict.
func (s *DB) PutVolume(ctx context.Context, v sandbox.Volume) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO volumes (id, team_id, name, created_at) VALUES ($1, $2, $3, $4)`,
		v.ID, v.TeamID, v.Name, unixNano(v.CreatedAt))
	if violates(err, "volumes_team_name") {
		return sandbox.Errorf(sandbox.KindConflict, "volume with name %q already exists", v.Name)
	}
	if err != nil {
		return fmt.Errorf("put volume %s: %w", v.ID, err)
	}
	return nil
}

func scanVolume(row pgx.Row) (sandbox.Volume, error) {
	var v sandbox.Volume
	var created int64
	if err := row.Scan(&v.ID, &v.TeamID, &v.Name, &created); err != nil {
		return sandbox.Volume{}, err
	}
	v.CreatedAt = fromUnixNano(created)
	return v, nil
}

// GetVolume returns a volume by ID.
func (s *DB) GetVolume(ctx context.Context, id string) (sandbox.Volume, error) {
	v, err := scanVolume(s.pool.QueryRow(ctx, `SELECT id, team_id, name, created_at FROM volumes WHERE id = $1`, id))
	if err != nil {
		return sandbox.Volume{}, notFound(err, "volume")
	}
	return v, nil
}

// ListVolumes returns a team's volumes, oldest first.
func (s *DB) ListVolumes(ctx context.Context, teamID string) ([]sandbox.Volume, error) {
	return s.listVolumes(ctx, `WHERE team_id = $1`, teamID)
}

// ListAllVolumes returns every team's volumes, oldest first.
func (s *DB) ListAllVolumes(ctx context.Context) ([]sandbox.Volume, error) {
	return s.listVolumes(ctx, ``)
}

func (s *DB) listVolumes(ctx context.Context, where string, args ...any) ([]sandbox.Volume, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, team_id, name, created_at FROM volumes `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	defer rows.Close()
	var out []sandbox.Volume
	for rows.Next() {
		v, err := scanVolume(rows)
		if err != nil {
			return nil, fmt.Errorf("list volumes: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// DeleteVolume removes a volume's record.
func (s *DB) DeleteVolume(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM volumes WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete volume %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return sandbox.Errorf(sandbox.KindNotFound, "volume not found")
	}
	return nil
}
