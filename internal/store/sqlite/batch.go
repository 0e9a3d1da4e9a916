package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/warrenhq/warren/internal/store/sqlstore"
)

// Writes that arrive while another is committed go together in the next
// transaction (a group commit, sqlstore's queue): a burst of creates saves
// each sandbox two or three times, and on one connection each commit of
// its own would wait for all those before it. Every write runs in a
// savepoint of its own, so one that fails changes nothing and fails alone.

// maxBatch bounds the writes of one transaction.
const maxBatch = 256

// pendingWrite is one write waiting for the writer.
type pendingWrite = sqlstore.Pending[func(context.Context, *sql.Tx) error]

// write runs fn in the writer's next transaction and returns its error,
// or the commit's. fn's statements run without ctx's cancellation: SQLite
// rolls back the whole transaction, other writes with it, when a
// statement in it is interrupted. A write whose ctx ends before its turn
// is not run.
func (s *DB) write(ctx context.Context, fn func(context.Context, *sql.Tx) error) error {
	return sqlstore.Submit(ctx, s.writes, s.closing, fn)
}

// writer commits the writes that wait, in batches, until Close.
func (s *DB) writer() {
	defer close(s.writerDone)
	sqlstore.RunWriter(s.writes, s.closing, maxBatch, s.commit)
}

// commit runs batch in one transaction, each write in a savepoint.
func (s *DB) commit(batch []*pendingWrite) {
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		for _, w := range batch {
			w.Err = err
		}
		return
	}
	defer tx.Rollback()
	for _, w := range batch {
		if w.Err = w.Ctx.Err(); w.Err != nil {
			continue
		}
		if _, err := tx.ExecContext(ctx, `SAVEPOINT w`); err != nil {
			w.Err = err
			continue
		}
		if w.Err = w.Op(context.WithoutCancel(w.Ctx), tx); w.Err != nil {
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO w`); err != nil {
				w.Err = errors.Join(w.Err, fmt.Errorf("undo a failed write: %w", err))
			}
		}
		if _, err := tx.ExecContext(ctx, `RELEASE w`); err != nil && w.Err == nil {
			w.Err = err
		}
	}
	if err := tx.Commit(); err != nil {
		for _, w := range batch {
			if w.Err == nil {
				w.Err = fmt.Errorf("commit: %w", err)
			}
		}
	}
}
