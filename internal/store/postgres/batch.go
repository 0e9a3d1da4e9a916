package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The writes of a sandbox's life (its state, events with their
// deliveries, log lines, metric samples) go through one writer, as in the
// SQLite store: those that arrive while a batch is committed go together
// in the next transaction, so a burst of creates pays one commit (one WAL
// flush) for many writes instead of one each. A write alone runs in a
// transaction of its own; in a batch, every write runs in a savepoint of
// its own, so one that fails changes nothing and fails alone. Other
// writes, rarer, go straight to the pool.

// maxBatch bounds the writes of one transaction.
const maxBatch = 256

// errClosed is what a write after Close returns.
var errClosed = errors.New("the store is closed")

// pendingWrite is one write waiting for the writer.
type pendingWrite struct {
	ctx  context.Context
	fn   func(context.Context, pgx.Tx) error
	err  error
	done chan struct{}
}

// write runs fn in the writer's next transaction and returns its error,
// or the commit's. fn's statements run without ctx's cancellation: pgx
// closes a connection whose query is cancelled, and with it the other
// writes of the batch. A write whose ctx ends before its turn is not run.
func (s *DB) write(ctx context.Context, fn func(context.Context, pgx.Tx) error) error {
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

// commit runs batch in one transaction, each write in a savepoint when
// there are several.
func (s *DB) commit(batch []*pendingWrite) {
	defer func() {
		for _, w := range batch {
			close(w.done)
		}
	}()
	var live []*pendingWrite
	for _, w := range batch {
		if w.err = w.ctx.Err(); w.err == nil {
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		return
	}
	ctx := context.Background()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		for _, w := range live {
			w.err = err
		}
		return
	}
	defer tx.Rollback(ctx)
	if len(live) == 1 {
		if live[0].err = live[0].fn(context.WithoutCancel(live[0].ctx), tx); live[0].err != nil {
			return
		}
	} else {
		for _, w := range live {
			w.err = savepoint(ctx, tx, w)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		for _, w := range live {
			if w.err == nil {
				w.err = fmt.Errorf("commit: %w", err)
			}
		}
	}
}

// savepoint runs w in a savepoint of tx, undone if it fails.
func savepoint(ctx context.Context, tx pgx.Tx, w *pendingWrite) error {
	if _, err := tx.Exec(ctx, `SAVEPOINT w`); err != nil {
		return err
	}
	err := w.fn(context.WithoutCancel(w.ctx), tx)
	if err != nil {
		if _, rerr := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT w`); rerr != nil {
			return errors.Join(err, fmt.Errorf("undo a failed write: %w", rerr))
		}
	}
	if _, rerr := tx.Exec(ctx, `RELEASE SAVEPOINT w`); rerr != nil && err == nil {
		return rerr
	}
	return err
}
