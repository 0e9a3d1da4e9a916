package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// A sandbox's samples thin out with age, so that its whole life stays
// queryable at a bounded cost: the newest keep samples stay as they are;
// older ones are thinned to one a minute, and those more than metricsDay
// older than the newest sample to one per metricsOldStep. The sample kept
// in each step is its first, with steps aligned on the clock, so thinning
// again never drops a sample an earlier pass kept, and a sandbox sampled
// every 5 s for a day with keep 720 (an hour) holds about 2,100 rows.
const (
	metricsStep    = time.Minute
	metricsDay     = 24 * time.Hour
	metricsOldStep = 10 * time.Minute
)

// AddMetric records a sample. With keep > 0 the sandbox's history is then
// thinned, once per minute of samples: the first sample of each new minute
// does it, so the work (one pass over at most a few thousand rows of one
// sandbox) is not repeated on every insert. keep <= 0 keeps everything.
func (s *DB) AddMetric(ctx context.Context, sandboxID string, st sandbox.Stats, keep int) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode metric: %w", err)
	}
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var last sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT MAX(ts) FROM sandbox_metrics WHERE sandbox_id = ?`,
			sandboxID).Scan(&last); err != nil {
			return fmt.Errorf("add metric: %w", err)
		}
		ts := unixNano(st.Time)
		if _, err := tx.ExecContext(ctx, `INSERT INTO sandbox_metrics (sandbox_id, ts, data) VALUES (?, ?, ?)`,
			sandboxID, ts, string(data)); err != nil {
			return fmt.Errorf("add metric: %w", err)
		}
		step := int64(metricsStep)
		if keep > 0 && last.Valid && ts/step != last.Int64/step {
			if err := thinMetrics(ctx, tx, sandboxID, keep, max(ts, last.Int64)); err != nil {
				return err
			}
		}
		return nil
	})
}

// thinMetrics deletes the samples of a sandbox that its age steps do not
// keep; newest is the time of its newest sample, in Unix nanoseconds.
func thinMetrics(ctx context.Context, tx *sql.Tx, sandboxID string, keep int, newest int64) error {
	// Samples older than the keep-th newest are partitioned by age (within a
	// day of the newest or not) and by step; all but the first of each
	// partition go.
	_, err := tx.ExecContext(ctx, `DELETE FROM sandbox_metrics WHERE seq IN (
		SELECT seq FROM (
			SELECT seq, ROW_NUMBER() OVER (
				PARTITION BY ts < :old, ts / CASE WHEN ts < :old THEN :oldstep ELSE :step END
				ORDER BY ts, seq) AS n
			FROM sandbox_metrics
			WHERE sandbox_id = :id AND ts < (
				SELECT ts FROM sandbox_metrics WHERE sandbox_id = :id
				ORDER BY ts DESC, seq DESC LIMIT 1 OFFSET :offset))
		WHERE n > 1)`,
		sql.Named("id", sandboxID), sql.Named("offset", keep-1),
		sql.Named("old", newest-int64(metricsDay)),
		sql.Named("step", int64(metricsStep)), sql.Named("oldstep", int64(metricsOldStep)))
	if err != nil {
		return fmt.Errorf("thin metrics: %w", err)
	}
	return nil
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
