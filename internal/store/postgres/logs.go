package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlstore"
)

// AppendLog adds an entry to a sandbox's log.
func (s *DB) AppendLog(ctx context.Context, e sandbox.LogEntry) error {
	fields, err := json.Marshal(e.Fields)
	if err != nil {
		return fmt.Errorf("encode log fields: %w", err)
	}
	err = s.exec(ctx, e.SandboxID, sqlstore.Stmt{
		SQL:  `INSERT INTO sandbox_logs (sandbox_id, ts, level, message, fields) VALUES ($1, $2, $3, $4, $5)`,
		Args: []any{e.SandboxID, unixNano(e.Time), text(e.Level), text(e.Message), string(fields)}})
	if err != nil {
		return fmt.Errorf("append log: %w", err)
	}
	return nil
}

// Logs returns a sandbox's log entries selected by q.
func (s *DB) Logs(ctx context.Context, sandboxID string, q sandbox.LogQuery) ([]sandbox.LogEntry, error) {
	until := int64(1<<63 - 1)
	if !q.Until.IsZero() {
		until = q.Until.UnixNano()
	}
	order := "ASC"
	if q.Backward {
		order = "DESC"
	}
	rows, err := s.pool.Query(ctx,
		`SELECT ts, level, message, fields FROM sandbox_logs
		 WHERE sandbox_id = $1 AND ts >= $2 AND ts <= $3 ORDER BY ts `+order+`, seq `+order+` LIMIT $4`,
		sandboxID, unixNano(q.Since), until, noLimit(q.Limit))
	if err != nil {
		return nil, fmt.Errorf("read logs: %w", err)
	}
	defer rows.Close()
	var out []sandbox.LogEntry
	for rows.Next() {
		e := sandbox.LogEntry{SandboxID: sandboxID}
		var ts int64
		var fields string
		if err := rows.Scan(&ts, &e.Level, &e.Message, &fields); err != nil {
			return nil, err
		}
		e.Time = fromUnixNano(ts)
		if err := json.Unmarshal([]byte(fields), &e.Fields); err != nil {
			return nil, fmt.Errorf("decode log fields: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
