package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Events, webhooks and deliveries are kept as JSON beside the columns
// their queries use.

var _ events.Store = (*DB)(nil)

// AddEvent stores ev and its deliveries in one transaction.
func (s *DB) AddEvent(ctx context.Context, ev sandbox.Event, deliveries []events.Delivery) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sandbox_events (id, team_id, sandbox_id, ts, data) VALUES (?, ?, ?, ?, ?)`,
			ev.ID, ev.TeamID, ev.SandboxID, unixNano(ev.Time), string(data)); err != nil {
			return fmt.Errorf("add event: %w", err)
		}
		for _, d := range deliveries {
			if err := putDelivery(ctx, tx, d); err != nil {
				return err
			}
		}
		return nil
	})
}

// GetEvent returns an event by ID.
func (s *DB) GetEvent(ctx context.Context, id string) (sandbox.Event, error) {
	var data string
	if err := s.db.QueryRowContext(ctx, `SELECT data FROM sandbox_events WHERE id = ?`, id).Scan(&data); err != nil {
		return sandbox.Event{}, notFound(err, "event")
	}
	return decodeJSON[sandbox.Event](data)
}

// Events returns the events q selects, in the order it asks.
func (s *DB) Events(ctx context.Context, q events.Query) ([]sandbox.Event, error) {
	order := "DESC"
	if q.Ascending {
		order = "ASC"
	}
	where, args := `team_id = ?`, []any{q.TeamID}
	if q.SandboxID != "" {
		where, args = where+` AND sandbox_id = ?`, append(args, q.SandboxID)
	}
	if !q.Before.IsZero() {
		where, args = where+` AND ts < ?`, append(args, unixNano(q.Before))
	}
	limit := q.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	// order is one of two constants, never input.
	return queryJSON[sandbox.Event](ctx, s.db,
		`SELECT data FROM sandbox_events WHERE `+where+` ORDER BY seq `+order+` LIMIT ? OFFSET ?`,
		append(args, limit, max(q.Offset, 0))...)
}

// DeleteEventsBefore removes events older than t and the deliveries of
// them that are done; a pending one keeps its event.
func (s *DB) DeleteEventsBefore(ctx context.Context, t time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	old := `SELECT id FROM sandbox_events WHERE ts < ?`
	if _, err := tx.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE status != ? AND event_id IN (`+old+`)`,
		string(events.DeliveryPending), unixNano(t)); err != nil {
		return fmt.Errorf("delete old deliveries: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM sandbox_events WHERE ts < ? AND id NOT IN (SELECT event_id FROM webhook_deliveries)`,
		unixNano(t)); err != nil {
		return fmt.Errorf("delete old events: %w", err)
	}
	return tx.Commit()
}

// PutWebhook inserts or replaces a webhook.
func (s *DB) PutWebhook(ctx context.Context, w events.Webhook) error {
	data, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("encode webhook: %w", err)
	}
	_, err = s.db.ExecContext(ctx,
		`INSERT INTO webhooks (id, team_id, created_at, data) VALUES (?, ?, ?, ?)
		 ON CONFLICT(id) DO UPDATE SET data=excluded.data`,
		w.ID, w.TeamID, unixNano(w.CreatedAt), string(data))
	if err != nil {
		return fmt.Errorf("put webhook %s: %w", w.ID, err)
	}
	return nil
}

// GetWebhook returns a webhook by ID.
func (s *DB) GetWebhook(ctx context.Context, id string) (events.Webhook, error) {
	var data string
	if err := s.db.QueryRowContext(ctx, `SELECT data FROM webhooks WHERE id = ?`, id).Scan(&data); err != nil {
		return events.Webhook{}, notFound(err, "webhook")
	}
	return decodeJSON[events.Webhook](data)
}

// ListWebhooks returns a team's webhooks (all when teamID is ""), oldest
// first.
func (s *DB) ListWebhooks(ctx context.Context, teamID string) ([]events.Webhook, error) {
	if teamID == "" {
		return queryJSON[events.Webhook](ctx, s.db, `SELECT data FROM webhooks ORDER BY created_at, id`)
	}
	return queryJSON[events.Webhook](ctx, s.db, `SELECT data FROM webhooks WHERE team_id = ? ORDER BY created_at, id`, teamID)
}

// DeleteWebhook removes a webhook and its deliveries.
func (s *DB) DeleteWebhook(ctx context.Context, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE webhook_id = ?`, id); err != nil {
		return fmt.Errorf("delete webhook deliveries: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM webhooks WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	return tx.Commit()
}

// DueDeliveries returns pending deliveries due by now, each the oldest
// pending one of its webhook and sandbox, at most perWebhook of each
// webhook, oldest first.
func (s *DB) DueDeliveries(ctx context.Context, now time.Time, perWebhook int) ([]events.Delivery, error) {
	return queryJSON[events.Delivery](ctx, s.db,
		`SELECT data FROM (
			SELECT d.data, d.seq, ROW_NUMBER() OVER (PARTITION BY d.webhook_id ORDER BY d.seq) AS n
			FROM webhook_deliveries d
			WHERE d.status = ? AND d.next_attempt <= ? AND d.seq = (
				SELECT MIN(p.seq) FROM webhook_deliveries p
				WHERE p.webhook_id = d.webhook_id AND p.sandbox_id = d.sandbox_id AND p.status = ?))
		 WHERE n <= ? ORDER BY seq`,
		string(events.DeliveryPending), unixNano(now), string(events.DeliveryPending), perWebhook)
}

// PutDelivery inserts or replaces a delivery.
func (s *DB) PutDelivery(ctx context.Context, d events.Delivery) error {
	return putDelivery(ctx, s.db, d)
}

// Deliveries returns a webhook's newest deliveries, newest first.
func (s *DB) Deliveries(ctx context.Context, webhookID string, limit int) ([]events.Delivery, error) {
	return queryJSON[events.Delivery](ctx, s.db,
		`SELECT data FROM webhook_deliveries WHERE webhook_id = ? ORDER BY seq DESC LIMIT ?`, webhookID, limit)
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func putDelivery(ctx context.Context, db execer, d events.Delivery) error {
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode delivery: %w", err)
	}
	_, err = db.ExecContext(ctx,
		`INSERT INTO webhook_deliveries (id, webhook_id, event_id, sandbox_id, status, next_attempt, data)
		 VALUES (?, ?, ?, ?, ?, ?, ?)
		 ON CONFLICT(id) DO UPDATE SET status=excluded.status, next_attempt=excluded.next_attempt, data=excluded.data`,
		d.ID, d.WebhookID, d.EventID, d.SandboxID, string(d.Status), unixNano(d.NextAttempt), string(data))
	if err != nil {
		return fmt.Errorf("put delivery %s: %w", d.ID, err)
	}
	return nil
}
