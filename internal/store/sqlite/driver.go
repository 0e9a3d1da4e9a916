package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/warrenhq/warren/internal/store/sqlstore"
)

// driver gives the shared records (internal/store/sqlstore) this store's
// database: its one connection, its transactions and its writer.
type driver struct {
	querier
	s *DB
}

// Tx runs fn in a transaction on the store's connection.
func (d driver) Tx(ctx context.Context, fn func(sqlstore.Querier) error) error {
	tx, err := d.s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(querier{tx}); err != nil {
		return err
	}
	return tx.Commit()
}

// Batch runs stmts in the writer's next transaction; SQLite has one
// writer, whatever the sandbox.
func (d driver) Batch(ctx context.Context, _ string, stmts ...sqlstore.Stmt) error {
	return d.s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, st := range stmts {
			if _, err := tx.ExecContext(ctx, st.SQL, st.Args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// BatchFunc runs fn in the writer's next transaction.
func (d driver) BatchFunc(ctx context.Context, _ string, fn func(context.Context, sqlstore.Querier) error) error {
	return d.s.write(ctx, func(ctx context.Context, tx *sql.Tx) error { return fn(ctx, querier{tx}) })
}

// querier runs statements on a *sql.DB or a *sql.Tx.
type querier struct {
	q interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
}

func (q querier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q querier) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rows, err := q.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (q querier) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return q.q.QueryRowContext(ctx, query, args...)
}

// sqlRows are *sql.Rows whose Close, after Next, has nothing to report.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

// uniqueIndexes are the columns of each unique constraint sqlstore
// classifies, as SQLite names them in its error. The name of a template
// is checked before it is written, on the one connection, so only
// PostgreSQL's replicas can race on it.
var uniqueIndexes = map[string]string{
	sqlstore.UniqueVolumeName: "volumes.team_id, volumes.name",
	sqlstore.UniqueSecretName: "secrets.team_id, secrets.name",
}

// unique reports whether err violates the unique constraint named.
func unique(err error, constraint string) bool {
	cols, ok := uniqueIndexes[constraint]
	return ok && err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed: "+cols)
}
