package sqlite

import (
	"context"
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
	t := sandbox.Team{ID: id}
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT name, created_at FROM teams WHERE id = ?`, id).Scan(&t.Name, &created)
	if err != nil {
		return sandbox.Team{}, notFound(err, "team")
	}
	t.CreatedAt = fromUnixNano(created)
	return t, nil
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
