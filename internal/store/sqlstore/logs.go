package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/warrenhq/warren/internal/sandbox"
)

// AppendLog adds an entry to a sandbox's log, as a write of the sandbox.
func (s *Store) AppendLog(ctx context.Context, e sandbox.LogEntry) error {
	fields, err := json.Marshal(e.Fields)
	if err != nil {
		return fmt.Errorf("encode log fields: %w", err)
	}
	err = s.db.Batch(ctx, e.SandboxID, Stmt{
		SQL:  `INSERT INTO sandbox_logs (sandbox_id, ts, level, message, fields) VALUES ($1, $2, $3, $4, $5)`,
		Args: []any{e.SandboxID, unixNano(e.Time), s.dialect.Text(e.Level), s.dialect.Text(e.Message), string(fields)}})
	if err != nil {
		return fmt.Errorf("append log: %w", err)
	}
	return nil
}

// Logs returns a sandbox's log entries selected by q.
func (s *Store) Logs(ctx context.Context, sandboxID string, q sandbox.LogQuery) ([]sandbox.LogEntry, error) {
	until := maxTime
	if !q.Until.IsZero() {
		until = q.Until.UnixNano()
	}
	order := "ASC"
	if q.Backward {
		order = "DESC"
	}
	// order is one of two constants, never input.
	out, err := collect(ctx, s.db, func(row Row) (sandbox.LogEntry, error) {
		e := sandbox.LogEntry{SandboxID: sandboxID}
		var ts int64
		var fields string
		if err := row.Scan(&ts, &e.Level, &e.Message, &fields); err != nil {
			return e, err
		}
		e.Time = fromUnixNano(ts)
		if err := json.Unmarshal([]byte(fields), &e.Fields); err != nil {
			return e, fmt.Errorf("decode log fields: %w", err)
		}
		return e, nil
	}, `SELECT ts, level, message, fields FROM sandbox_logs
		 WHERE sandbox_id = $1 AND ts >= $2 AND ts <= $3 ORDER BY ts `+order+`, seq `+order+` LIMIT $4`,
		sandboxID, unixNano(q.Since), until, noLimit(q.Limit))
	if err != nil {
		return nil, fmt.Errorf("read logs: %w", err)
	}
	return out, nil
}
