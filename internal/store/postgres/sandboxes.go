package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlstore"
)

// PutSandbox inserts or replaces a sandbox.
func (s *DB) PutSandbox(ctx context.Context, sb sandbox.Sandbox) error {
	data, err := json.Marshal(sb)
	if err != nil {
		return fmt.Errorf("encode sandbox: %w", err)
	}
	err = s.exec(ctx, sb.ID, sqlstore.Stmt{
		SQL: `INSERT INTO sandboxes (id, team_id, state, started_at, data) VALUES ($1, $2, $3, $4, $5)
		 ON CONFLICT (id) DO UPDATE SET team_id=excluded.team_id, state=excluded.state,
		 started_at=excluded.started_at, data=excluded.data`,
		Args: []any{sb.ID, sb.TeamID, string(sb.State), unixNano(sb.StartedAt), string(data)}})
	if err != nil {
		return fmt.Errorf("put sandbox %s: %w", sb.ID, err)
	}
	return nil
}

// GetSandbox returns a sandbox by ID.
func (s *DB) GetSandbox(ctx context.Context, id string) (sandbox.Sandbox, error) {
	var data string
	if err := s.pool.QueryRow(ctx, `SELECT data FROM sandboxes WHERE id = $1`, id).Scan(&data); err != nil {
		return sandbox.Sandbox{}, notFound(err, "sandbox")
	}
	return decodeJSON[sandbox.Sandbox](data)
}

// ListSandboxes returns the sandboxes matching f ordered by StartedAt, ID.
func (s *DB) ListSandboxes(ctx context.Context, f sandbox.SandboxFilter) ([]sandbox.Sandbox, error) {
	var where []string
	var args []any
	if f.TeamID != "" {
		args = append(args, f.TeamID)
		where = append(where, "team_id = $"+strconv.Itoa(len(args)))
	}
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, st := range f.States {
			states[i] = string(st)
		}
		args = append(args, states)
		where = append(where, "state = ANY($"+strconv.Itoa(len(args))+")")
	}
	q := "SELECT data FROM sandboxes"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	out, err := queryJSON[sandbox.Sandbox](ctx, s.pool, q+" ORDER BY started_at, id", args...)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	return out, nil
}

// DeleteSandbox removes a sandbox with its logs and metric samples.
func (s *DB) DeleteSandbox(ctx context.Context, id string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, q := range []string{
			`DELETE FROM sandboxes WHERE id = $1`,
			`DELETE FROM sandbox_logs WHERE sandbox_id = $1`,
			`DELETE FROM sandbox_metrics WHERE sandbox_id = $1`,
		} {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	return nil
}

// pgxQuerier is a pool, a connection or a transaction.
type pgxQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func decodeJSON[T any](data string) (T, error) {
	var v T
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		return v, fmt.Errorf("decode %T: %w", v, err)
	}
	return v, nil
}

// queryJSON returns the records of q's one column, JSON text.
func queryJSON[T any](ctx context.Context, db pgxQuerier, q string, args ...any) ([]T, error) {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		v, err := decodeJSON[T](data)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
