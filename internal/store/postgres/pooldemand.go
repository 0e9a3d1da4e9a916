package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/warrenhq/warren/internal/sandbox"
)

// peak is a sandbox.DemandPeak as stored in pool_demand.peaks.
type peak struct {
	At   int64 `json:"at"` // Unix nanoseconds
	Size int   `json:"size"`
}

// SavePoolDemand replaces every template's demand with ds, in one
// transaction: what is not in ds is gone after.
func (s *DB) SavePoolDemand(ctx context.Context, ds []sandbox.PoolDemand) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM pool_demand`); err != nil {
			return err
		}
		for _, d := range ds {
			peaks := make([]peak, len(d.Peaks))
			for i, p := range d.Peaks {
				peaks[i] = peak{At: unixNano(p.At), Size: p.Size}
			}
			data, err := json.Marshal(peaks)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO pool_demand (template_id, team_id, peaks) VALUES ($1, $2, $3)`,
				d.TemplateID, d.TeamID, string(data)); err != nil {
				return fmt.Errorf("of %s: %w", d.TemplateID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save pool demand: %w", err)
	}
	return nil
}

// PoolDemand returns the demand SavePoolDemand saved last, by template ID.
func (s *DB) PoolDemand(ctx context.Context) ([]sandbox.PoolDemand, error) {
	rows, err := s.pool.Query(ctx, `SELECT template_id, team_id, peaks FROM pool_demand ORDER BY template_id`)
	if err != nil {
		return nil, fmt.Errorf("read pool demand: %w", err)
	}
	defer rows.Close()
	var out []sandbox.PoolDemand
	for rows.Next() {
		var d sandbox.PoolDemand
		var data string
		if err := rows.Scan(&d.TemplateID, &d.TeamID, &data); err != nil {
			return nil, fmt.Errorf("read pool demand: %w", err)
		}
		var peaks []peak
		if err := json.Unmarshal([]byte(data), &peaks); err != nil {
			return nil, fmt.Errorf("read pool demand of %s: %w", d.TemplateID, err)
		}
		for _, p := range peaks {
			d.Peaks = append(d.Peaks, sandbox.DemandPeak{At: fromUnixNano(p.At), Size: p.Size})
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read pool demand: %w", err)
	}
	return out, nil
}
