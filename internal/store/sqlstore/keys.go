package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/warrenhq/warren/internal/sandbox"
)

// PutTeam inserts or replaces a team.
func (s *Store) PutTeam(ctx context.Context, t sandbox.Team) error {
	_, err := s.db.Exec(ctx,
		`INSERT INTO teams (id, name, created_at) VALUES ($1, $2, $3)
		 ON CONFLICT (id) DO UPDATE SET name=excluded.name`,
		t.ID, t.Name, unixNano(t.CreatedAt))
	if err != nil {
		return fmt.Errorf("put team %s: %w", t.ID, err)
	}
	return nil
}

// GetTeam returns a team by ID.
func (s *Store) GetTeam(ctx context.Context, id string) (sandbox.Team, error) {
	t, err := scanTeam(s.db.QueryRow(ctx, `SELECT `+teamColumns+` FROM teams WHERE id = $1`, id))
	if err != nil {
		return sandbox.Team{}, notFound(err, "team")
	}
	return t, nil
}

const teamColumns = `id, name, created_at, quota`

func scanTeam(row Row) (sandbox.Team, error) {
	var t sandbox.Team
	var created int64
	var quota string
	if err := row.Scan(&t.ID, &t.Name, &created, &quota); err != nil {
		return sandbox.Team{}, err
	}
	t.CreatedAt = fromUnixNano(created)
	if err := json.Unmarshal([]byte(quota), &t.Quota); err != nil {
		return sandbox.Team{}, fmt.Errorf("team %s: its quota: %w", t.ID, err)
	}
	return t, nil
}

// ListTeams returns every team, by ID.
func (s *Store) ListTeams(ctx context.Context) ([]sandbox.Team, error) {
	out, err := collect(ctx, s.db, scanTeam, `SELECT `+teamColumns+` FROM teams ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	return out, nil
}

// SetTeamQuota replaces a team's quota; the team must exist.
func (s *Store) SetTeamQuota(ctx context.Context, teamID string, q sandbox.Quota) error {
	data, err := json.Marshal(q)
	if err != nil {
		return err
	}
	return changeOne(ctx, s.db, "set the quota of team "+teamID, "team '"+teamID+"' not found",
		`UPDATE teams SET quota = $1 WHERE id = $2`, string(data), teamID)
}

// CreateAPIKey stores a new key; its team must exist.
func (s *Store) CreateAPIKey(ctx context.Context, k sandbox.APIKey) error {
	if _, err := s.GetTeam(ctx, k.TeamID); err != nil {
		return err
	}
	_, err := s.db.Exec(ctx,
		`INSERT INTO api_keys (id, team_id, name, hash, mask, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		k.ID, k.TeamID, k.Name, k.Hash, k.Mask, unixNano(k.CreatedAt))
	if err != nil {
		return fmt.Errorf("create api key: %w", err)
	}
	return nil
}

const keyColumns = `id, team_id, name, hash, mask, created_at`

func scanKey(row Row) (sandbox.APIKey, error) {
	var k sandbox.APIKey
	var created int64
	if err := row.Scan(&k.ID, &k.TeamID, &k.Name, &k.Hash, &k.Mask, &created); err != nil {
		return sandbox.APIKey{}, err
	}
	k.CreatedAt = fromUnixNano(created)
	return k, nil
}

// APIKeyByHash returns the key whose hash is hash.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (sandbox.APIKey, error) {
	k, err := scanKey(s.db.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE hash = $1`, hash))
	if err != nil {
		return sandbox.APIKey{}, notFound(err, "api key")
	}
	return k, nil
}

// ListAPIKeys returns every key, oldest first.
func (s *Store) ListAPIKeys(ctx context.Context) ([]sandbox.APIKey, error) {
	return s.listKeys(ctx, ``)
}

// ListTeamAPIKeys returns the keys of one team, oldest first.
func (s *Store) ListTeamAPIKeys(ctx context.Context, teamID string) ([]sandbox.APIKey, error) {
	return s.listKeys(ctx, `WHERE team_id = $1`, teamID)
}

func (s *Store) listKeys(ctx context.Context, where string, args ...any) ([]sandbox.APIKey, error) {
	out, err := collect(ctx, s.db, scanKey, `SELECT `+keyColumns+` FROM api_keys `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return out, nil
}

// DeleteAPIKey revokes the key with the given ID.
func (s *Store) DeleteAPIKey(ctx context.Context, id string) error {
	return changeOne(ctx, s.db, "delete api key", "api key "+id+" not found", `DELETE FROM api_keys WHERE id = $1`, id)
}

// RenameAPIKey changes the name of the key with the given ID.
func (s *Store) RenameAPIKey(ctx context.Context, id, name string) error {
	return changeOne(ctx, s.db, "rename api key", "api key "+id+" not found", `UPDATE api_keys SET name = $1 WHERE id = $2`, name, id)
}
