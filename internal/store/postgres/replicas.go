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
	// pgx sends a nil slice as NULL, which the column refuses: an empty
	// body (a 204) is an empty bytea.
	body := a.Body
	if body == nil {
		body = []byte{}
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO call_answers (key, status, content_type, body, made_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (key) DO NOTHING`, key, a.Status, a.ContentType, body, now.UnixNano())
	b.Queue(`DELETE FROM call_answers WHERE made_at < $1`, now.Add(-store.CallAnswerKept).UnixNano())
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("save call answer: %w", err)
	}
	return nil
}

var _ store.SharedFiles = (*DB)(nil)

// SharedFile returns the sealed file kept under name.
func (s *DB) SharedFile(ctx context.Context, name string) ([]byte, bool, error) {
	var sealed []byte
	err := s.pool.QueryRow(ctx, `SELECT sealed FROM shared_files WHERE name = $1`, name).Scan(&sealed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("shared file %s: %w", name, err)
	}
	return sealed, true, nil
}

// ShareFile keeps sealed under name unless a file is kept there already,
// and returns the one kept.
func (s *DB) ShareFile(ctx context.Context, name string, sealed []byte) ([]byte, error) {
	_, err := s.pool.Exec(ctx, `INSERT INTO shared_files (name, sealed, made_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING`,
		name, sealed, time.Now().UnixNano())
	if err != nil {
		return nil, fmt.Errorf("share file %s: %w", name, err)
	}
	kept, _, err := s.SharedFile(ctx, name)
	return kept, err
}

// SwapSharedFile keeps next under name if old is kept there (nil: none
// is), and returns the one kept after.
func (s *DB) SwapSharedFile(ctx context.Context, name string, old, next []byte) ([]byte, error) {
	if old == nil {
		return s.ShareFile(ctx, name, next)
	}
	_, err := s.pool.Exec(ctx, `UPDATE shared_files SET sealed = $3, made_at = $4 WHERE name = $1 AND sealed = $2`,
		name, old, next, time.Now().UnixNano())
	if err != nil {
		return nil, fmt.Errorf("swap shared file %s: %w", name, err)
	}
	kept, _, err := s.SharedFile(ctx, name)
	return kept, err
}

// sharedFilesLock is the key of the advisory lock replicas take turns
// under to load or make the shared files.
const sharedFilesLock = 0x77617272656e + 1

// LockSharedFiles takes the advisory lock of the shared files on a
// connection of its own, held until unlock.
func (s *DB) LockSharedFiles(ctx context.Context) (func(), error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock the shared files: %w", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(sharedFilesLock)); err != nil {
		conn.Release()
		return nil, fmt.Errorf("lock the shared files: %w", err)
	}
	return func() {
		if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, int64(sharedFilesLock)); err != nil {
			conn.Conn().Close(context.Background()) // a closed session holds no lock
		}
		conn.Release()
	}, nil
}
