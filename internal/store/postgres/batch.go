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
// that fails changes nothing and fails alone. A batch that the server's
// shutdown cut (its FATAL error in place of the results) was not
// committed either, and runs again so too, on a new connection: the
// server closed its idle ones with it, which the pool drops. Other
// writes, rarer, go straight to the pool.

// maxBatch bounds the writes of one transaction.
const maxBatch = 256

// writers is how many batches may be committed at once.
const writers = 4

// pendingWrite is one write waiting for its writer.
type pendingWrite = sqlstore.Pending[writeOp]

// writeOp is what a write runs: its statements, when it is only
// statements; fn runs it in a transaction, always.
type writeOp struct {
	stmts []sqlstore.Stmt
	fn    func(context.Context, pgx.Tx) error
}

// exec runs stmts, in order, in the next transaction of the writer of
// sandbox sandboxID.
func (s *DB) exec(ctx context.Context, sandboxID string, stmts ...sqlstore.Stmt) error {
	return s.enqueue(ctx, sandboxID, writeOp{stmts: stmts, fn: func(ctx context.Context, tx pgx.Tx) error {
		for _, st := range stmts {
			if _, err := tx.Exec(ctx, st.SQL, st.Args...); err != nil {
				return err
			}
		}
		return nil
	}})
}

// write runs fn in the next transaction of the writer of sandbox
// sandboxID and returns its error, or the commit's. fn's statements run
// without ctx's cancellation: pgx closes a connection whose query is
// cancelled, and with it the other writes of the batch. A write whose ctx
// ends before its turn is not run.
func (s *DB) write(ctx context.Context, sandboxID string, fn func(context.Context, pgx.Tx) error) error {
	return s.enqueue(ctx, sandboxID, writeOp{fn: fn})
}

// enqueue hands op to the writer of sandboxID and waits for it to be done.
func (s *DB) enqueue(ctx context.Context, sandboxID string, op writeOp) error {
	return sqlstore.Submit(ctx, s.writes[writerOf(sandboxID)], s.closing, op)
}

// writerOf returns the index of the writer of a sandbox's writes.
func writerOf(sandboxID string) int {
	h := fnv.New32a()
	h.Write([]byte(sandboxID))
	return int(h.Sum32() % writers)
}

// writer commits the writes that come on writes, in batches, until Close.
func (s *DB) writer(writes <-chan *pendingWrite) {
	sqlstore.RunWriter(writes, s.closing, maxBatch, s.commit)
}

// commit runs batch in one transaction: pipelined when it is only
// statements, else (or when the server refused a statement of it) with
// each write in a savepoint when there are several.
func (s *DB) commit(batch []*pendingWrite) {
	var live []*pendingWrite
	statements := true
	for _, w := range batch {
		if w.Err = w.Ctx.Err(); w.Err == nil {
			live = append(live, w)
			statements = statements && w.Op.stmts != nil
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
		if lostConnection(err) {
			// Idle connections the server closed with this one would fail
			// the retry below too.
			s.pool.Reset()
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) && !errors.As(err, new(pgx.ErrPreprocessingBatch)) {
			// Not the server refusing a statement (a lost connection): the
			// batch may or may not be committed, and is not tried again.
			for _, w := range live {
				w.Err = err
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
		for _, st := range w.Op.stmts {
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
			w.Err = err
		}
		return
	}
	defer tx.Rollback(ctx)
	if len(live) == 1 {
		if live[0].Err = live[0].Op.fn(context.WithoutCancel(live[0].Ctx), tx); live[0].Err != nil {
			return
		}
	} else {
		for _, w := range live {
			w.Err = savepoint(ctx, tx, w)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		for _, w := range live {
			if w.Err == nil {
				w.Err = fmt.Errorf("commit: %w", err)
			}
		}
	}
}

// savepoint runs w in a savepoint of tx, undone if it fails.
func savepoint(ctx context.Context, tx pgx.Tx, w *pendingWrite) error {
	if _, err := tx.Exec(ctx, `SAVEPOINT w`); err != nil {
		return err
	}
	err := w.Op.fn(context.WithoutCancel(w.Ctx), tx)
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
