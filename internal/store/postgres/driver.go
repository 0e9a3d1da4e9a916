package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlstore"
)

// driver gives the shared records (internal/store/sqlstore) this store's
// database: its pool, its transactions and its writers.
type driver struct {
	querier
	s *DB
}

// Tx runs fn in a transaction on a connection of the pool.
func (d driver) Tx(ctx context.Context, fn func(sqlstore.Querier) error) error {
	return d.s.unavailable(pgx.BeginFunc(ctx, d.s.pool, func(tx pgx.Tx) error { return fn(querier{tx, d.s}) }))
}

// Batch runs stmts in the next batch of the writer of sandboxID,
// pipelined when the batch is only statements.
func (d driver) Batch(ctx context.Context, sandboxID string, stmts ...sqlstore.Stmt) error {
	return d.s.unavailable(d.s.exec(ctx, sandboxID, stmts...))
}

// BatchFunc runs fn in the next transaction of the writer of sandboxID.
func (d driver) BatchFunc(ctx context.Context, sandboxID string, fn func(context.Context, sqlstore.Querier) error) error {
	return d.s.unavailable(d.s.write(ctx, sandboxID, func(ctx context.Context, tx pgx.Tx) error { return fn(ctx, querier{tx, d.s}) }))
}

// querier runs statements on the pool or a transaction.
type querier struct {
	q interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
	s *DB
}

func (q querier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.q.Exec(ctx, sql, args...)
	return tag.RowsAffected(), q.s.unavailable(err)
}

func (q querier) Query(ctx context.Context, sql string, args ...any) (sqlstore.Rows, error) {
	r, err := q.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, q.s.unavailable(err)
	}
	return rows{r, q.s}, nil
}

func (q querier) QueryRow(ctx context.Context, sql string, args ...any) sqlstore.Row {
	return row{q.q.QueryRow(ctx, sql, args...), q.s}
}

// row and rows say which of their errors are a lost connection.
type row struct {
	pgx.Row
	s *DB
}

type rows struct {
	pgx.Rows
	s *DB
}

func (r row) Scan(dest ...any) error  { return r.s.unavailable(r.Row.Scan(dest...)) }
func (r rows) Scan(dest ...any) error { return r.s.unavailable(r.Rows.Scan(dest...)) }
func (r rows) Err() error             { return r.s.unavailable(r.Rows.Err()) }

// unique reports whether err is a unique violation of constraint.
func unique(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == constraint
}

// storeRetry is the Retry-After of a call that found the store out of
// reach: a PostgreSQL restart takes a second or two.
const storeRetry = time.Second

// unavailable is the package's unavailable, and on a lost connection it
// drops the pool's idle connections too: a server that restarted closed
// them all, and each would fail the next call that takes it (the pool
// checks only those idle for over a second) where a new one succeeds.
func (s *DB) unavailable(err error) error {
	if err != nil && lostConnection(err) {
		s.pool.Reset()
	}
	return unavailable(err)
}

// unavailable returns err as a KindUnavailable error, with a Retry-After,
// when it is a lost or refused connection to the server (a restart, a
// managed database's failover, a network cut): the API answers it 503
// rather than 500, as a condition that passes, not a bug. Other errors,
// nil among them, are returned as they are.
func unavailable(err error) error {
	if err == nil || !lostConnection(err) || sandbox.KindOf(err) == sandbox.KindUnavailable {
		return err
	}
	return &sandbox.Error{Kind: sandbox.KindUnavailable, Message: "the store is unavailable: try again shortly",
		Err: err, RetryAfter: storeRetry}
}

// lostConnection reports whether err is a connection to the server that
// failed or broke, rather than the server refusing a statement or a
// login.
func lostConnection(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", "57P02", "57P03": // admin shutdown, crash shutdown, cannot connect now
			return true
		}
		return strings.HasPrefix(pe.Code, "08") // connection exception
	}
	return errors.As(err, new(*pgconn.ConnectError)) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, new(net.Error))
}
