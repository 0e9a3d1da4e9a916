package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/warrenhq/warren/internal/sandbox"
)

const secretColumns = `id, team_id, name, version, metadata, created_at, updated_at, sealed`

// CreateSecret inserts a secret; a second secret of the same name in a
// team is a conflict.
func (s *Store) CreateSecret(ctx context.Context, sec sandbox.Secret) error {
	md, err := json.Marshal(sec.Metadata)
	if err != nil {
		return fmt.Errorf("encode secret metadata: %w", err)
	}
	_, err = s.db.Exec(ctx, `INSERT INTO secrets (`+secretColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		sec.ID, sec.TeamID, sec.Name, sec.Version, string(md), unixNano(sec.CreatedAt), unixNano(sec.UpdatedAt), sec.Sealed)
	if s.dialect.Unique(err, UniqueSecretName) {
		return sandbox.Errorf(sandbox.KindConflict, "secret with name %q already exists", sec.Name)
	}
	if err != nil {
		return fmt.Errorf("create secret %s: %w", sec.ID, err)
	}
	return nil
}

// UpdateSecret replaces a secret's version, value, metadata and update
// time when its stored version is prev.
func (s *Store) UpdateSecret(ctx context.Context, sec sandbox.Secret, prev int64) error {
	md, err := json.Marshal(sec.Metadata)
	if err != nil {
		return fmt.Errorf("encode secret metadata: %w", err)
	}
	n, err := s.db.Exec(ctx,
		`UPDATE secrets SET version = $1, metadata = $2, updated_at = $3, sealed = $4 WHERE id = $5 AND team_id = $6 AND version = $7`,
		sec.Version, string(md), unixNano(sec.UpdatedAt), sec.Sealed, sec.ID, sec.TeamID, prev)
	if err != nil {
		return fmt.Errorf("update secret %s: %w", sec.ID, err)
	}
	if n == 1 {
		return nil
	}
	if _, err := s.GetSecret(ctx, sec.TeamID, sec.ID); err != nil {
		return err
	}
	return sandbox.Errorf(sandbox.KindConflict, "secret %q was updated at the same time; retry", sec.Name)
}

func scanSecret(row Row) (sandbox.Secret, error) {
	var sec sandbox.Secret
	var md string
	var created, updated int64
	if err := row.Scan(&sec.ID, &sec.TeamID, &sec.Name, &sec.Version, &md, &created, &updated, &sec.Sealed); err != nil {
		return sandbox.Secret{}, err
	}
	if err := json.Unmarshal([]byte(md), &sec.Metadata); err != nil {
		return sandbox.Secret{}, fmt.Errorf("decode metadata of secret %s: %w", sec.ID, err)
	}
	sec.CreatedAt, sec.UpdatedAt = fromUnixNano(created), fromUnixNano(updated)
	return sec, nil
}

// GetSecret returns a team's secret by ID.
func (s *Store) GetSecret(ctx context.Context, teamID, id string) (sandbox.Secret, error) {
	sec, err := scanSecret(s.db.QueryRow(ctx, `SELECT `+secretColumns+` FROM secrets WHERE id = $1 AND team_id = $2`, id, teamID))
	if err != nil {
		return sandbox.Secret{}, notFound(err, "secret")
	}
	return sec, nil
}

// SecretByName returns a team's secret by its (lowercase) name.
func (s *Store) SecretByName(ctx context.Context, teamID, name string) (sandbox.Secret, error) {
	sec, err := scanSecret(s.db.QueryRow(ctx, `SELECT `+secretColumns+` FROM secrets WHERE team_id = $1 AND name = $2`, teamID, name))
	if err != nil {
		return sandbox.Secret{}, notFound(err, "secret")
	}
	return sec, nil
}

// ListSecrets returns up to limit of a team's secrets with names after
// after, by name.
func (s *Store) ListSecrets(ctx context.Context, teamID, after string, limit int) ([]sandbox.Secret, error) {
	out, err := collect(ctx, s.db, scanSecret,
		`SELECT `+secretColumns+` FROM secrets WHERE team_id = $1 AND name > $2 ORDER BY name LIMIT $3`, teamID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return out, nil
}

// DeleteSecret removes a team's secret with its value.
func (s *Store) DeleteSecret(ctx context.Context, teamID, id string) error {
	return changeOne(ctx, s.db, "delete secret "+id, "secret not found", `DELETE FROM secrets WHERE id = $1 AND team_id = $2`, id, teamID)
}
