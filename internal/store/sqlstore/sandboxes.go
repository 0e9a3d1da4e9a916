package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Sandboxes are kept as JSON with the columns queries filter on beside it,
// so a new field needs no migration.

// PutSandbox inserts or replaces a sandbox, with the events of its change
// and their deliveries, as one write: all or none, committed in the
// order of the sandbox's other writes (see AddEvent).
func (s *Store) PutSandbox(ctx context.Context, sb sandbox.Sandbox, evs ...sandbox.Recorded) error {
	data, err := json.Marshal(sb)
	if err != nil {
		return fmt.Errorf("encode sandbox: %w", err)
	}
	stmts := []Stmt{{
		SQL: `INSERT INTO sandboxes (id, team_id, state, started_at, data) VALUES ($1, $2, $3, $4, $5)
		 ON CONFLICT (id) DO UPDATE SET team_id=excluded.team_id, state=excluded.state,
		 started_at=excluded.started_at, data=excluded.data`,
		Args: []any{sb.ID, sb.TeamID, string(sb.State), unixNano(sb.StartedAt), string(data)}}}
	for _, ev := range evs {
		if stmts, err = appendEvent(stmts, ev); err != nil {
			return err
		}
	}
	if err := s.db.Batch(ctx, sb.ID, stmts...); err != nil {
		return fmt.Errorf("put sandbox %s: %w", sb.ID, err)
	}
	return nil
}

// GetSandbox returns a sandbox by ID.
func (s *Store) GetSandbox(ctx context.Context, id string) (sandbox.Sandbox, error) {
	return getJSON[sandbox.Sandbox](ctx, s.db, "sandbox", `SELECT data FROM sandboxes WHERE id = $1`, id)
}

// ListSandboxes returns the sandboxes matching f ordered by StartedAt, ID.
func (s *Store) ListSandboxes(ctx context.Context, f sandbox.SandboxFilter) ([]sandbox.Sandbox, error) {
	var where []string
	var args []any
	if f.TeamID != "" {
		args = append(args, f.TeamID)
		where = append(where, "team_id = $"+strconv.Itoa(len(args)))
	}
	if len(f.States) > 0 {
		in := make([]string, len(f.States))
		for i, st := range f.States {
			args = append(args, string(st))
			in[i] = "$" + strconv.Itoa(len(args))
		}
		where = append(where, "state IN ("+strings.Join(in, ", ")+")")
	}
	q := "SELECT data FROM sandboxes"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	out, err := queryJSON[sandbox.Sandbox](ctx, s.db, q+" ORDER BY started_at, id", args...)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	return out, nil
}

// DeleteSandbox removes a sandbox with its logs and metric samples.
func (s *Store) DeleteSandbox(ctx context.Context, id string) error {
	err := s.db.Tx(ctx, func(tx Querier) error {
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
