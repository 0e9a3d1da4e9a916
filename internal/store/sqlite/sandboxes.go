package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Sandboxes are kept as JSON with the columns queries filter on beside it,
// so a new field needs no migration.

// PutSandbox inserts or replaces a sandbox.
func (s *DB) PutSandbox(ctx context.Context, sb sandbox.Sandbox) error {
	data, err := json.Marshal(sb)
	if err != nil {
		return fmt.Errorf("encode sandbox: %w", err)
	}
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO sandboxes (id, team_id, state, started_at, data) VALUES (?, ?, ?, ?, ?)
			 ON CONFLICT(id) DO UPDATE SET team_id=excluded.team_id, state=excluded.state,
			 started_at=excluded.started_at, data=excluded.data`,
			sb.ID, sb.TeamID, string(sb.State), unixNano(sb.StartedAt), string(data))
		return err
	})
	if err != nil {
		return fmt.Errorf("put sandbox %s: %w", sb.ID, err)
	}
	return nil
}

// GetSandbox returns a sandbox by ID.
func (s *DB) GetSandbox(ctx context.Context, id string) (sandbox.Sandbox, error) {
	var data string
	err := s.db.QueryRowContext(ctx, `SELECT data FROM sandboxes WHERE id = ?`, id).Scan(&data)
	if err != nil {
		return sandbox.Sandbox{}, notFound(err, "sandbox")
	}
	return decodeSandbox(data)
}

// ListSandboxes returns the sandboxes matching f ordered by StartedAt, ID.
func (s *DB) ListSandboxes(ctx context.Context, f sandbox.SandboxFilter) ([]sandbox.Sandbox, error) {
	var where []string
	var args []any
	if f.TeamID != "" {
		where = append(where, "team_id = ?")
		args = append(args, f.TeamID)
	}
	if len(f.States) > 0 {
		where = append(where, "state IN (?"+strings.Repeat(",?", len(f.States)-1)+")")
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	q := "SELECT data FROM sandboxes"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY started_at, id"
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	defer rows.Close()
	var out []sandbox.Sandbox
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		sb, err := decodeSandbox(data)
		if err != nil {
			return nil, err
		}
		out = append(out, sb)
	}
	return out, rows.Err()
}

// DeleteSandbox removes a sandbox with its logs and metric samples.
func (s *DB) DeleteSandbox(ctx context.Context, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, q := range []string{
		`DELETE FROM sandboxes WHERE id = ?`,
		`DELETE FROM sandbox_logs WHERE sandbox_id = ?`,
		`DELETE FROM sandbox_metrics WHERE sandbox_id = ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, id); err != nil {
			return fmt.Errorf("delete sandbox %s: %w", id, err)
		}
	}
	return tx.Commit()
}

func decodeSandbox(data string) (sandbox.Sandbox, error) {
	var sb sandbox.Sandbox
	if err := json.Unmarshal([]byte(data), &sb); err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("decode sandbox: %w", err)
	}
	return sb, nil
}
