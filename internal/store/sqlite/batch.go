package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Writes that arrive while another is committed go together in the next
// transaction (a group commit): a burst of creates saves each sandbox two
// or three times, and on one connection each commit of its own would wait
// for all those before it. Every write runs in a savepoint of its own, so
// one that fails changes nothing and fails alone.

// maxBatch bounds the writes of one transaction.
const maxBatch = 256

// errClosed is what a write after Close returns.
var errClosed = errors.New("the store is closed")

// pendingWrite is one write waiting for the writer.
type pendingWrite struct {
	ctx  context.Context
	fn   func(context.Context, *sql.Tx) error
	err  error
	done chan struct{}
}

// write runs fn in the writer's next transaction and returns its error,
// or the commit's. fn's statements run without ctx's cancellation: SQLite
// rolls back the whole transaction, other writes with it, when a
// statement in it is interrupted. A write whose ctx ends before its turn
// is not run.
func (s *DB) write(ctx context.Context, fn func(context.Context, *sql.Tx) error) error {
	w := &pendingWrite{ctx: ctx, fn: fn, done: make(chan struct{})}
	select {
	case s.writes <- w:
	case <-s.closing:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	<-w.done
	return w.err
}

// writer commits the writes that wait, in batches, until Close.
func (s *DB) writer() {
	defer close(s.writerDone)
	for {
		var batch []*pendingWrite
		select {
		case w := <-s.writes:
			batch = append(batch, w)
		case <-s.closing:
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case w := <-s.writes:
				batch = append(batch, w)
			default:
				break more
			}
		}
		s.commit(batch)
	}
}

// commit runs batch in one transaction, each write in a savepoint.
func (s *DB) commit(batch []*pendingWrite) {
	defer func() {
		for _, w := range batch {
			close(w.done)
		}
	}()
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		for _, w := range batch {
			w.err = err
		}
		return
	}
	defer tx.Rollback()
	for _, w := range batch {
		if w.err = w.ctx.Err(); w.err != nil {
			continue
		}
		if _, err := tx.ExecContext(ctx, `SAVEPOINT w`); err != nil {
			w.err = err
			continue
		}
		if w.err = w.fn(context.WithoutCancel(w.ctx), tx); w.err != nil {
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO w`); err != nil {
				w.err = errors.Join(w.err, fmt.Errorf("undo a failed write: %w", err))
			}
		}
		if _, err := tx.ExecContext(ctx, `RELEASE w`); err != nil && w.err == nil {
			w.err = err
		}
	}
	if err := tx.Commit(); err != nil {
		for _, w := range batch {
			if w.err == nil {
				w.err = fmt.Errorf("commit: %w", err)
			}
		}
	}
}
