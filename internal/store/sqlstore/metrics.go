package sqlstore

import (
	"context"
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

// AddMetric records a sample, as a write of the sandbox. With keep > 0
// the sandbox's history is then thinned, once per minute of samples: the
// first sample of each new minute does it, so the work (one pass over at
// most a few thousand rows of one sandbox) is not repeated on every
// insert. keep <= 0 keeps everything.
func (s *Store) AddMetric(ctx context.Context, sandboxID string, st sandbox.Stats, keep int) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode metric: %w", err)
	}
	return s.db.BatchFunc(ctx, sandboxID, func(ctx context.Context, tx Querier) error {
		var last *int64
		if err := tx.QueryRow(ctx, `SELECT MAX(ts) FROM sandbox_metrics WHERE sandbox_id = $1`,
			sandboxID).Scan(&last); err != nil {
			return fmt.Errorf("add metric: %w", err)
		}
		ts := unixNano(st.Time)
		if _, err := tx.Exec(ctx, `INSERT INTO sandbox_metrics (sandbox_id, ts, data) VALUES ($1, $2, $3)`,
			sandboxID, ts, string(data)); err != nil {
			return fmt.Errorf("add metric: %w", err)
		}
		step := int64(metricsStep)
		if keep > 0 && last != nil && ts/step != *last/step {
			if err := thinMetrics(ctx, tx, sandboxID, keep, max(ts, *last)); err != nil {
				return err
			}
		}
		return nil
	})
}

// thinMetrics deletes the samples of a sandbox that its age steps do not
// keep; newest is the time of its newest sample, in Unix nanoseconds.
func thinMetrics(ctx context.Context, tx Querier, sandboxID string, keep int, newest int64) error {
	// Samples older than the keep-th newest are partitioned by age (within a
	// day of the newest or not) and by step; all but the first of each
	// partition go. The steps are cast for PostgreSQL, which cannot tell
	// the type of a parameter in a CASE.
	_, err := tx.Exec(ctx, `DELETE FROM sandbox_metrics WHERE seq IN (
		SELECT seq FROM (
			SELECT seq, ROW_NUMBER() OVER (
				PARTITION BY ts < $3, ts / CASE WHEN ts < $3 THEN CAST($4 AS BIGINT) ELSE CAST($5 AS BIGINT) END
				ORDER BY ts, seq) AS n
			FROM sandbox_metrics
			WHERE sandbox_id = $1 AND ts < (
				SELECT ts FROM sandbox_metrics WHERE sandbox_id = $1
				ORDER BY ts DESC, seq DESC LIMIT 1 OFFSET $2)) ranked
		WHERE n > 1)`,
		sandboxID, keep-1, newest-int64(metricsDay), int64(metricsOldStep), int64(metricsStep))
	if err != nil {
		return fmt.Errorf("thin metrics: %w", err)
	}
	return nil
}

// Metrics returns a sandbox's samples within [from, to], oldest first.
func (s *Store) Metrics(ctx context.Context, sandboxID string, from, to time.Time) ([]sandbox.Stats, error) {
	until := maxTime
	if !to.IsZero() {
		until = to.UnixNano()
	}
	out, err := queryJSON[sandbox.Stats](ctx, s.db,
		`SELECT data FROM sandbox_metrics WHERE sandbox_id = $1 AND ts >= $2 AND ts <= $3 ORDER BY ts, seq`,
		sandboxID, unixNano(from), until)
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}
