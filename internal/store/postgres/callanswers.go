package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/warrenhq/warren/internal/store"
)

var _ store.CallAnswers = (*DB)(nil)

// CallAnswer returns the answer kept for a forwarded call's key.
func (s *DB) CallAnswer(ctx context.Context, key string) (store.CallAnswer, bool, error) {
	var a store.CallAnswer
	err := s.pool.QueryRow(ctx, `SELECT status, content_type, body FROM call_answers WHERE key = $1`, key).
		Scan(&a.Status, &a.ContentType, &a.Body)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.CallAnswer{}, false, nil
	case err != nil:
		return store.CallAnswer{}, false, fmt.Errorf("call answer: %w", err)
	}
	return a, true, nil
}

// SaveCallAnswer keeps a forwarded call's answer under its key (the first
// one kept stays), and drops those older than store.CallAnswerKept.
func (s *DB) SaveCallAnswer(ctx context.Context, key string, a store.CallAnswer) error {
	now := time.Now()
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO call_answers (key, status, content_type, body, made_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (key) DO NOTHING`, key, a.Status, a.ContentType, a.Body, now.UnixNano())
	b.Queue(`DELETE FROM call_answers WHERE made_at < $1`, now.Add(-store.CallAnswerKept).UnixNano())
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("save call answer: %w", err)
	}
	return nil
}
