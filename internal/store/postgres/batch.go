package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/warrenhq/warren/internal/store/sqlstore"
)

// The writes of a sandbox's life (its state, events with their
// deliveries, log lines, metric samples) go through a few writers, as in
// the SQLite store through one: those that arrive while a batch is
// committed go together in the next transaction, so a burst of creates
// pays one commit (one WAL flush) for many writes instead of one each.
// Unlike SQLite, PostgreSQL commits several transactions at once, and
// flushes their commits together: while one writer waits for its flush,
// the next batch is under way on another. The writes of one sandbox all
// go through one writer, in the order they come, as through SQLite's one
// writer: its events are numbered (seq) in the order they commit, which
// the order of their webhook deliveries relies on. A batch of writes that are
// only statements (exec) is sent in one round trip, pipelined, as one
// implicit transaction. When the server refuses one of its statements it
// rolls the whole batch back, and the batch runs again the slow way, as
// do batches with writes that read what they write (write): in a
// transaction, each write in a savepoint of its own (or alone), so one
// that fails changes nothing and fails alone. Other writes, rarer, go
// straight to the pool.

// maxBatch bounds the writes of one transaction.
const maxBatch = 256

// writers is how many batches may be committed at once.
const writers = 4

// errClosed is what a write after Close returns.
var errClosed = errors.New("the store is closed")

// pendingWrite is one write waiting for the writer.
type pendingWrite struct {
	ctx context.Context
	// stmts are the write's statements, when it is only statements; fn
	// runs it in a transaction, always.
	stmts []sqlstore.Stmt
	fn    func(context.Context, pgx.Tx) error
	err   error
	done  chan struct{}
}

// exec runs stmts, in order, in the next transaction of the writer of
// sandbox sandboxID.
func (s *DB) exec(ctx context.Context, sandboxID string, stmts ...sqlstore.Stmt) error {
	return s.enqueue(ctx, sandboxID, &pendingWrite{ctx: ctx, stmts: stmts, fn: func(ctx context.Context, tx pgx.Tx) error {
		for _, st := range stmts {
			if _, err := tx.Exec(ctx, st.SQL, st.Args...); err != nil {
				return err
			}
		}
		return nil
	}})
}

// write runs fn in the next transaction of the writer of sandbox
// sandboxID and returns its error, or the commit's. fn's statements run without ctx's cancellation: pgx
// closes a connection whose query is cancelled, and with it the other
// writes of the batch. A write whose ctx ends before its turn is not run.
func (s *DB) write(ctx context.Context, sandboxID string, fn func(context.Context, pgx.Tx) error) error {
	return s.enqueue(ctx, sandboxID, &pendingWrite{ctx: ctx, fn: fn})
}

// enqueue hands w to the writer of sandboxID and waits for it to be done.
func (s *DB) enqueue(ctx context.Context, sandboxID string, w *pendingWrite) error {
	w.done = make(chan struct{})
	select {
	case s.writes[writerOf(sandboxID)] <- w:
	case <-s.closing:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	<-w.done
	return w.err
}

// writerOf returns the index of the writer of a sandbox's writes.
func writerOf(sandboxID string) int {
	h := fnv.New32a()
	h.Write([]byte(sandboxID))
	return int(h.Sum32() % writers)
}

// writer commits the writes that come on writes, in batches, until Close.
func (s *DB) writer(writes <-chan *pendingWrite) {
	for {
		var batch []*pendingWrite
		select {
		case w := <-writes:
			batch = append(batch, w)
		case <-s.closing:
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case w := <-writes:
				batch = append(batch, w)
			default:
				break more
			}
		}
		s.commit(batch)
	}
}

// commit runs batch in one transaction: pipelined when it is only
// statements, else (or when the server refused a statement of it) with
// each write in a savepoint when there are several.
func (s *DB) commit(batch []*pendingWrite) {
	defer func() {
		for _, w := range batch {
			close(w.done)
		}
	}()
	var live []*pendingWrite
	statements := true
	for _, w := range batch {
		if w.err = w.ctx.Err(); w.err == nil {
			live = append(live, w)
			statements = statements && w.stmts != nil
		}
	}
	if len(live) == 0 {
		return
	}
	ctx := context.Background()
	if statements {
		err := s.pipeline(ctx, live)
		if err == nil {
			return
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) && !errors.As(err, new(pgx.ErrPreprocessingBatch)) {
			// Not the server refusing a statement (a lost connection): the
			// batch may or may not be committed, and is not tried again.
			for _, w := range live {
				w.err = err
			}
			return
		}
	}
	s.transact(ctx, live)
}

// pipeline sends the statements of live in one round trip, as one
// implicit transaction, all or nothing.
func (s *DB) pipeline(ctx context.Context, live []*pendingWrite) error {
	b := &pgx.Batch{}
	for _, w := range live {
		for _, st := range w.stmts {
			b.Queue(st.SQL, st.Args...)
		}
	}
	return s.pool.SendBatch(ctx, b).Close()
}

// transact runs live in one transaction, each write in a savepoint when
// there are several.
func (s *DB) transact(ctx context.Context, live []*pendingWrite) {
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
