package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Events, webhooks and deliveries are kept as JSON beside the columns
// their queries use.

// AddEvent stores ev and its deliveries in one transaction, as a write
// of its sandbox: the writes of one sandbox commit in the order they
// come, so its events are numbered (seq) in that order, which the order
// of their webhook deliveries relies on.
func (s *Store) AddEvent(ctx context.Context, ev sandbox.Event, deliveries []sandbox.Delivery) error {
	stmts, err := appendEvent(nil, sandbox.Recorded{Event: ev, Deliveries: deliveries})
	if err != nil {
		return err
	}
	if err := s.db.Batch(ctx, ev.SandboxID, stmts...); err != nil {
		return fmt.Errorf("add event %s: %w", ev.ID, err)
	}
	return nil
}

// appendEvent appends to stmts those that insert ev's event and its
// deliveries.
func appendEvent(stmts []Stmt, ev sandbox.Recorded) ([]Stmt, error) {
	data, err := json.Marshal(ev.Event)
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	e := ev.Event
	stmts = append(stmts, Stmt{SQL: `INSERT INTO sandbox_events (id, team_id, sandbox_id, ts, data) VALUES ($1, $2, $3, $4, $5)`,
		Args: []any{e.ID, e.TeamID, e.SandboxID, unixNano(e.Time), string(data)}})
	for _, d := range ev.Deliveries {
		st, err := deliveryStmt(d)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, st)
	}
	return stmts, nil
}

// GetEvent returns an event by ID.
func (s *Store) GetEvent(ctx context.Context, id string) (sandbox.Event, error) {
	return getJSON[sandbox.Event](ctx, s.db, "event", `SELECT data FROM sandbox_events WHERE id = $1`, id)
}

// Events returns the events q selects, in the order it asks.
func (s *Store) Events(ctx context.Context, q events.Query) ([]sandbox.Event, error) {
	order := "DESC"
	if q.Ascending {
		order = "ASC"
	}
	where, args := `team_id = $1`, []any{q.TeamID}
	if q.SandboxID != "" {
		args = append(args, q.SandboxID)
		where += ` AND sandbox_id = $` + strconv.Itoa(len(args))
	}
	if !q.Before.IsZero() {
		args = append(args, unixNano(q.Before))
		where += ` AND ts < $` + strconv.Itoa(len(args))
	}
	args = append(args, noLimit(q.Limit), max(q.Offset, 0))
	n := len(args)
	// order is one of two constants, never input.
	return queryJSON[sandbox.Event](ctx, s.db,
		`SELECT data FROM sandbox_events WHERE `+where+` ORDER BY seq `+order+
			` LIMIT $`+strconv.Itoa(n-1)+` OFFSET $`+strconv.Itoa(n), args...)
}

// DeleteEventsBefore removes events older than t and the deliveries of
// them that are done; a pending one keeps its event.
func (s *Store) DeleteEventsBefore(ctx context.Context, t time.Time) error {
	return s.db.Tx(ctx, func(tx Querier) error {
		if _, err := tx.Exec(ctx, `DELETE FROM webhook_deliveries WHERE status != $1
			AND event_id IN (SELECT id FROM sandbox_events WHERE ts < $2)`,
			string(sandbox.DeliveryPending), unixNano(t)); err != nil {
			return fmt.Errorf("delete old deliveries: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM sandbox_events AS e WHERE e.ts < $1
			AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)`,
			unixNano(t)); err != nil {
			return fmt.Errorf("delete old events: %w", err)
		}
		return nil
	})
}

// PutWebhook inserts or replaces a webhook.
func (s *Store) PutWebhook(ctx context.Context, w events.Webhook) error {
	data, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("encode webhook: %w", err)
	}
	_, err = s.db.Exec(ctx,
		`INSERT INTO webhooks (id, team_id, created_at, data) VALUES ($1, $2, $3, $4)
		 ON CONFLICT (id) DO UPDATE SET data=excluded.data`,
		w.ID, w.TeamID, unixNano(w.CreatedAt), string(data))
	if err != nil {
		return fmt.Errorf("put webhook %s: %w", w.ID, err)
	}
	return nil
}

// GetWebhook returns a webhook by ID.
func (s *Store) GetWebhook(ctx context.Context, id string) (events.Webhook, error) {
	return getJSON[events.Webhook](ctx, s.db, "webhook", `SELECT data FROM webhooks WHERE id = $1`, id)
}

// ListWebhooks returns a team's webhooks (all when teamID is ""), oldest
// first.
func (s *Store) ListWebhooks(ctx context.Context, teamID string) ([]events.Webhook, error) {
	return queryJSON[events.Webhook](ctx, s.db,
		`SELECT data FROM webhooks WHERE ($1 = '' OR team_id = $1) ORDER BY created_at, id`, teamID)
}

// DeleteWebhook removes a webhook and its deliveries.
func (s *Store) DeleteWebhook(ctx context.Context, id string) error {
	return s.db.Tx(ctx, func(tx Querier) error {
		if _, err := tx.Exec(ctx, `DELETE FROM webhook_deliveries WHERE webhook_id = $1`, id); err != nil {
			return fmt.Errorf("delete webhook deliveries: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM webhooks WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete webhook: %w", err)
		}
		return nil
	})
}

// DueDeliveries returns pending deliveries due by now, each the oldest
// pending one of its webhook and sandbox, at most perWebhook of each
// webhook, oldest first.
func (s *Store) DueDeliveries(ctx context.Context, now time.Time, perWebhook int) ([]sandbox.Delivery, error) {
	return queryJSON[sandbox.Delivery](ctx, s.db,
		`SELECT data FROM (
			SELECT d.data, d.seq, ROW_NUMBER() OVER (PARTITION BY d.webhook_id ORDER BY d.seq) AS n
			FROM webhook_deliveries d
			WHERE d.status = $1 AND d.next_attempt <= $2 AND d.seq = (
				SELECT MIN(p.seq) FROM webhook_deliveries p
				WHERE p.webhook_id = d.webhook_id AND p.sandbox_id = d.sandbox_id AND p.status = $1)) due
		 WHERE n <= $3 ORDER BY seq`,
		string(sandbox.DeliveryPending), unixNano(now), perWebhook)
}

// PutDelivery inserts or replaces a delivery.
func (s *Store) PutDelivery(ctx context.Context, d sandbox.Delivery) error {
	st, err := deliveryStmt(d)
	if err != nil {
		return err
	}
	if _, err := s.db.Exec(ctx, st.SQL, st.Args...); err != nil {
		return fmt.Errorf("put delivery %s: %w", d.ID, err)
	}
	return nil
}

// Deliveries returns a webhook's newest deliveries, newest first.
func (s *Store) Deliveries(ctx context.Context, webhookID string, limit int) ([]sandbox.Delivery, error) {
	return queryJSON[sandbox.Delivery](ctx, s.db,
		`SELECT data FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY seq DESC LIMIT $2`, webhookID, limit)
}

// deliveryStmt is the statement that inserts or replaces d.
func deliveryStmt(d sandbox.Delivery) (Stmt, error) {
	data, err := json.Marshal(d)
	if err != nil {
		return Stmt{}, fmt.Errorf("encode delivery: %w", err)
	}
	return Stmt{SQL: `INSERT INTO webhook_deliveries (id, webhook_id, event_id, sandbox_id, status, next_attempt, data)
		 VALUES ($1, $2, $3, $4, $5, $6, $7)
		 ON CONFLICT (id) DO UPDATE SET status=excluded.status, next_attempt=excluded.next_attempt, data=excluded.data`,
		Args: []any{d.ID, d.WebhookID, d.EventID, d.SandboxID, string(d.Status), unixNano(d.NextAttempt), string(data)}}, nil
}
