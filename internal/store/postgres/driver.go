package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	return pgx.BeginFunc(ctx, d.s.pool, func(tx pgx.Tx) error { return fn(querier{tx}) })
}

// Batch runs stmts in the next batch of the writer of sandboxID,
// pipelined when the batch is only statements.
func (d driver) Batch(ctx context.Context, sandboxID string, stmts ...sqlstore.Stmt) error {
	return d.s.exec(ctx, sandboxID, stmts...)
}

// BatchFunc runs fn in the next transaction of the writer of sandboxID.
func (d driver) BatchFunc(ctx context.Context, sandboxID string, fn func(context.Context, sqlstore.Querier) error) error {
	return d.s.write(ctx, sandboxID, func(ctx context.Context, tx pgx.Tx) error { return fn(ctx, querier{tx}) })
}

// querier runs statements on the pool or a transaction.
type querier struct {
	q interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
}

func (q querier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.q.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (q querier) Query(ctx context.Context, sql string, args ...any) (sqlstore.Rows, error) {
	return q.q.Query(ctx, sql, args...)
}

func (q querier) QueryRow(ctx context.Context, sql string, args ...any) sqlstore.Row {
	return q.q.QueryRow(ctx, sql, args...)
}

// unique reports whether err is a unique violation of constraint.
func unique(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == constraint
}
