package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/warrenhq/warren/internal/sandbox"
)

// peak is a sandbox.DemandPeak as stored in pool_demand.peaks.
type peak struct {
	At   int64 `json:"at"` // Unix nanoseconds
	Size int   `json:"size"`
}

// SavePoolDemand replaces every template's demand with ds, in one
// transaction: what is not in ds is gone after.
func (s *Store) SavePoolDemand(ctx context.Context, ds []sandbox.PoolDemand) error {
	err := s.db.Tx(ctx, func(tx Querier) error {
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
func (s *Store) PoolDemand(ctx context.Context) ([]sandbox.PoolDemand, error) {
	out, err := collect(ctx, s.db, scanDemand, `SELECT template_id, team_id, peaks FROM pool_demand ORDER BY template_id`)
	if err != nil {
		return nil, fmt.Errorf("read pool demand: %w", err)
	}
	return out, nil
}

func scanDemand(row Row) (sandbox.PoolDemand, error) {
	var d sandbox.PoolDemand
	var data string
	if err := row.Scan(&d.TemplateID, &d.TeamID, &data); err != nil {
		return d, err
	}
	var peaks []peak
	if err := json.Unmarshal([]byte(data), &peaks); err != nil {
		return d, fmt.Errorf("of %s: %w", d.TemplateID, err)
	}
	for _, p := range peaks {
		d.Peaks = append(d.Peaks, sandbox.DemandPeak{At: fromUnixNano(p.At), Size: p.Size})
	}
	return d, nil
}
