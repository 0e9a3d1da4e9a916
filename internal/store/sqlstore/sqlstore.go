// Package sqlstore is what Warren's two SQL stores share: the queries of
// every record (written once, with PostgreSQL's $1 placeholders, which
// modernc.org/sqlite binds by number too), their row scanning and the
// rules around them (what is a conflict, what is not found). Store
// implements the records of store.Store on a DB that an adapter gives it.
//
// It owns no connection, driver, schema or migration: internal/store/sqlite
// and internal/store/postgres open their databases, migrate them, commit
// their batches of writes each its own way (on the queue of batch.go) and
// say, through DB and Dialect, what differs between them.
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Querier runs statements: a database or one of its transactions.
type Querier interface {
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	// QueryRow's Scan returns an error that is sql.ErrNoRows when there
	// is no row.
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Row is a row to scan.
type Row interface{ Scan(dest ...any) error }

// Rows are the rows of a query.
type Rows interface {
	Row
	Next() bool
	Err() error
	Close()
}

// Stmt is one statement with its arguments.
type Stmt struct {
	SQL  string
	Args []any
}

// DB is an adapter's database: queries outside any transaction, and the
// two ways it writes.
type DB interface {
	Querier
	// Tx runs fn in a transaction of its own, committed when fn returns
	// nil.
	Tx(ctx context.Context, fn func(Querier) error) error
	// Batch runs stmts, in order and all or none, as one write of
	// sandbox sandboxID that the adapter may commit with others (its
	// group commit), and waits for the commit.
	Batch(ctx context.Context, sandboxID string, stmts ...Stmt) error
	// BatchFunc runs fn as Batch runs statements, for a write that reads
	// what it writes; fn's error fails the write alone.
	BatchFunc(ctx context.Context, sandboxID string, fn func(context.Context, Querier) error) error
}

// Dialect is what differs between the adapters' SQL beyond their DB.
type Dialect struct {
	// Text makes a string storable in a TEXT column (PostgreSQL refuses
	// NUL bytes and invalid UTF-8); nil stores every string as it is.
	Text func(string) string
	// Unique reports whether err is a violation of the unique constraint
	// of that PostgreSQL name (one of the Unique* constants); nil: never.
	Unique func(err error, constraint string) bool
}

// The unique constraints whose violation is a conflict the user caused,
// by their names in PostgreSQL's schema.
const (
	UniqueVolumeName   = "volumes_team_name"
	UniqueSecretName   = "secrets_team_name"
	UniqueTemplateName = "template_names_pkey"
)

// Store is Warren's records on a DB.
type Store struct {
	db      DB
	dialect Dialect
}

// New returns the records of db, in dialect d.
func New(db DB, d Dialect) *Store {
	if d.Text == nil {
		d.Text = func(s string) string { return s }
	}
	if d.Unique == nil {
		d.Unique = func(error, string) bool { return false }
	}
	return &Store{db: db, dialect: d}
}

// notFound turns sql.ErrNoRows into a KindNotFound error.
func notFound(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return sandbox.Errorf(sandbox.KindNotFound, "%s not found", what)
	}
	return err
}

// changeOne runs a statement that changes one row: its error is op's, and
// no row changed is KindNotFound, saying missing.
func changeOne(ctx context.Context, q Querier, op, missing, query string, args ...any) error {
	n, err := q.Exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if n == 0 {
		return sandbox.Errorf(sandbox.KindNotFound, "%s", missing)
	}
	return nil
}

// noLimit is a LIMIT's argument: n, or for n <= 0 no limit, which both
// dialects read from the largest BIGINT (SQLite refuses NULL there, and
// PostgreSQL -1).
func noLimit(n int) int64 {
	if n <= 0 {
		return math.MaxInt64
	}
	return int64(n)
}

// maxTime is the end of a range with no end, in Unix nanoseconds.
const maxTime = int64(math.MaxInt64)

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func decodeJSON[T any](data string) (T, error) {
	var v T
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		return v, fmt.Errorf("decode %T: %w", v, err)
	}
	return v, nil
}

// collect returns the rows of a query, each through scan.
func collect[T any](ctx context.Context, q Querier, scan func(Row) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// queryJSON returns the records of a query of one column, JSON text.
func queryJSON[T any](ctx context.Context, q Querier, query string, args ...any) ([]T, error) {
	return collect(ctx, q, scanJSON[T], query, args...)
}

func scanJSON[T any](row Row) (T, error) {
	var data string
	if err := row.Scan(&data); err != nil {
		var zero T
		return zero, err
	}
	return decodeJSON[T](data)
}

// getJSON returns the one record of a query of one column, JSON text; no
// row is KindNotFound, of what.
func getJSON[T any](ctx context.Context, q Querier, what, query string, args ...any) (T, error) {
	v, err := scanJSON[T](q.QueryRow(ctx, query, args...))
	if err != nil {
		var zero T
		return zero, notFound(err, what)
	}
	return v, nil
}
