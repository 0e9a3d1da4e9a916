package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/warrenhq/warren/internal/sandbox"
)

// PutTeam inserts or replaces a team.
func (s *DB) PutTeam(ctx context.Context, t sandbox.Team) error {
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO teams (id, name, created_at) VALUES (?, ?, ?)
		 ON CONFLICT(id) DO UPDATE SET name=excluded.name`,
		t.ID, t.Name, unixNano(t.CreatedAt))
	if err != nil {
		return fmt.Errorf("put team %s: %w", t.ID, err)
	}
	return nil
}

// GetTeam returns a team by ID.
func (s *DB) GetTeam(ctx context.Context, id string) (sandbox.Team, error) {
	t, err := scanTeam(s.db.QueryRowContext(ctx, `SELECT `+teamColumns+` FROM teams WHERE id = ?`, id))
	if err != nil {
		return sandbox.Team{}, notFound(err, "team")
	}
	return t, nil
}

const teamColumns = `id, name, created_at, quota`

func scanTeam(row scanner) (sandbox.Team, error) {
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
func (s *DB) ListTeams(ctx context.Context) ([]sandbox.Team, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+teamColumns+` FROM teams ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	defer rows.Close()
	var out []sandbox.Team
	for rows.Next() {
		t, err := scanTeam(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// SetTeamQuota replaces a team's quota; the team must exist.
func (s *DB) SetTeamQuota(ctx context.Context, teamID string, q sandbox.Quota) error {
	data, err := json.Marshal(q)
	if err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, `UPDATE teams SET quota = ? WHERE id = ?`, string(data), teamID)
	if err != nil {
		return fmt.Errorf("set the quota of team %s: %w", teamID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return sandbox.Errorf(sandbox.KindNotFound, "team '%s' not found", teamID)
	}
	return nil
}

// CreateAPIKey stores a new key; its team must exist.
func (s *DB) CreateAPIKey(ctx context.Context, k sandbox.APIKey) error {
	if _, err := s.GetTeam(ctx, k.TeamID); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO api_keys (id, team_id, name, hash, mask, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		k.ID, k.TeamID, k.Name, k.Hash, k.Mask, unixNano(k.CreatedAt))
	if err != nil {
		return fmt.Errorf("create api key: %w", err)
	}
	return nil
}

const keyColumns = `id, team_id, name, hash, mask, created_at`

type scanner interface{ Scan(...any) error }

func scanKey(row scanner) (sandbox.APIKey, error) {
	var k sandbox.APIKey
	var created int64
	if err := row.Scan(&k.ID, &k.TeamID, &k.Name, &k.Hash, &k.Mask, &created); err != nil {
		return sandbox.APIKey{}, err
	}
	k.CreatedAt = fromUnixNano(created)
	return k, nil
}

// APIKeyByHash returns the key whose hash is hash.
func (s *DB) APIKeyByHash(ctx context.Context, hash string) (sandbox.APIKey, error) {
	k, err := scanKey(s.db.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE hash = ?`, hash))
	if err != nil {
		return sandbox.APIKey{}, notFound(err, "api key")
	}
	return k, nil
}

// ListAPIKeys returns every key, oldest first.
func (s *DB) ListAPIKeys(ctx context.Context) ([]sandbox.APIKey, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+keyColumns+` FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	var out []sandbox.APIKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// DeleteAPIKey revokes the key with the given ID.
func (s *DB) DeleteAPIKey(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM api_keys WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete api key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return sandbox.Errorf(sandbox.KindNotFound, "api key %s not found", id)
	}
	return nil
}

// RenameAPIKey changes the name of the key with the given ID.
func (s *DB) RenameAPIKey(ctx context.Context, id, name string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE api_keys SET name = ? WHERE id = ?`, name, id)
	if err != nil {
		return fmt.Errorf("rename api key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return sandbox.Errorf(sandbox.KindNotFound, "api key %s not found", id)
	}
	return nil
}
