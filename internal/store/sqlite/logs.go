package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// AppendLog adds an entry to a sandbox's log.
func (s *DB) AppendLog(ctx context.Context, e sandbox.LogEntry) error {
	fields, err := json.Marshal(e.Fields)
	if err != nil {
		return fmt.Errorf("encode log fields: %w", err)
	}
	_, err = s.db.ExecContext(ctx,
		`INSERT INTO sandbox_logs (sandbox_id, ts, level, message, fields) VALUES (?, ?, ?, ?, ?)`,
		e.SandboxID, unixNano(e.Time), e.Level, e.Message, string(fields))
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
	limit := q.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := s.db.QueryContext(ctx,
		`SELECT ts, level, message, fields FROM sandbox_logs
		 WHERE sandbox_id = ? AND ts >= ? AND ts <= ? ORDER BY ts `+order+`, seq `+order+` LIMIT ?`,
		sandboxID, unixNano(q.Since), until, limit)
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

// AddMetric records a sample and trims the sandbox's history to keep.
func (s *DB) AddMetric(ctx context.Context, sandboxID string, st sandbox.Stats, keep int) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode metric: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO sandbox_metrics (sandbox_id, ts, data) VALUES (?, ?, ?)`,
		sandboxID, unixNano(st.Time), string(data)); err != nil {
		return fmt.Errorf("add metric: %w", err)
	}
	if keep > 0 {
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM sandbox_metrics WHERE sandbox_id = ? AND seq NOT IN
			 (SELECT seq FROM sandbox_metrics WHERE sandbox_id = ? ORDER BY ts DESC, seq DESC LIMIT ?)`,
			sandboxID, sandboxID, keep); err != nil {
			return fmt.Errorf("trim metrics: %w", err)
		}
	}
	return tx.Commit()
}

// Metrics returns a sandbox's samples within [from, to], oldest first.
func (s *DB) Metrics(ctx context.Context, sandboxID string, from, to time.Time) ([]sandbox.Stats, error) {
	until := int64(1<<63 - 1)
	if !to.IsZero() {
		until = to.UnixNano()
	}
	rows, err := s.db.QueryContext(ctx,
		`SELECT data FROM sandbox_metrics WHERE sandbox_id = ? AND ts >= ? AND ts <= ? ORDER BY ts, seq`,
		sandboxID, unixNano(from), until)
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	defer rows.Close()
	var out []sandbox.Stats
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var st sandbox.Stats
		if err := json.Unmarshal([]byte(data), &st); err != nil {
			return nil, fmt.Errorf("decode metric: %w", err)
		}
		out = append(out, st)
	}
	return out, rows.Err()
}
