// Package postgres is Warren's store on a PostgreSQL server, the adapter
// for several control-plane replicas sharing one database: the same
// records as internal/store/sqlite (sandboxes, teams, API keys (hashed),
// snapshots, templates and builds, events, webhooks and their deliveries,
// secrets (sealed), volumes, logs, metric samples, the dashboard's logins
// and sessions and the warm pools' learned demand), with the same
// semantics, checked by one conformance suite (internal/store/storetest):
// their queries are internal/store/sqlstore's, shared with SQLite. It
// owns what is PostgreSQL's own: the pool, the schema and its migrations
// (embedded SQL files, applied once under an advisory lock whoever opens
// the database first), the writers that batch and pipeline the writes of
// a sandbox's life, and which errors are which; it knows nothing of
// lifecycle rules, nor of which replica may write what.
package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store"
	"github.com/warrenhq/warren/internal/store/sqlstore"
)

// DB is a Warren store on a PostgreSQL database.
type DB struct {
	*sqlstore.Store
	pool *pgxpool.Pool
	// writes takes writes to the writer goroutines (batch.go), one
	// channel each; closing ends them, and writers waits for them.
	writes    [writers]chan *pendingWrite
	closing   chan struct{}
	writers   sync.WaitGroup
	closeOnce sync.Once
}

var _ store.Store = (*DB)(nil)

// migrationFiles are the schema's migrations, NNNN_name.sql, applied in
// order; the table schema_migrations lists those done. Append only: never
// edit a migration that has shipped.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock is the key of the advisory lock under which a replica
// migrates, so that replicas starting together migrate once.
const migrationLock = 0x77617272656e // "warren"

// Open connects to the database at url (postgres://user:pass@host:port/db?...,
// or any form pgx's ParseConfig takes, pool_max_conns at least 8),
// migrates it, and makes sure the
// default team exists. Close releases its connections.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "store URL: %v", err)
	}
	// The writers hold a connection each while they commit; reads get
	// the others.
	cfg.MaxConns = max(cfg.MaxConns, 2*writers)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &DB{pool: pool, closing: make(chan struct{})}
	s.Store = sqlstore.New(driver{querier{pool, s}, s}, sqlstore.Dialect{Text: text, Unique: unique})
	for i := range s.writes {
		s.writes[i] = make(chan *pendingWrite)
		s.writers.Go(func() { s.writer(s.writes[i]) })
	}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if _, err := s.GetTeam(ctx, sandbox.DefaultTeamID); sandbox.KindOf(err) == sandbox.KindNotFound {
		// ON CONFLICT keeps a team another replica made meanwhile.
		_, err = pool.Exec(ctx, `INSERT INTO teams (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING`,
			sandbox.DefaultTeamID, "default", time.Now().UnixNano())
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("make the default team: %w", err)
		}
	} else if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the writer, after the writes it has taken, and closes the
// connections.
func (s *DB) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.writers.Wait()
		s.pool.Close()
	})
	return nil
}

// migration is one file of migrations/.
type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []migration
	for i, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil || v != i+1 {
			return nil, fmt.Errorf("migration %s: want its name to start with %04d_", base, i+1)
		}
		data, err := migrationFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: base, sql: string(data)})
	}
	return out, nil
}

// SchemaVersion returns the number of migrations applied.
func (s *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// migrate applies the migrations not yet applied, all in one transaction
// (PostgreSQL's DDL is transactional): a failed one leaves the schema as
// it was.
func (s *DB) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate the store: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return fmt.Errorf("migrate the store: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		name TEXT NOT NULL,
		applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("migrate the store: %w", err)
	}
	var v int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v > len(ms) {
		return fmt.Errorf("store schema version %d is newer than this Warren (%d)", v, len(ms))
	}
	for _, m := range ms[v:] {
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return tx.Commit(ctx)
}

// text makes s storable in a TEXT column: PostgreSQL refuses NUL bytes
// and invalid UTF-8, which a build's output or a log line may hold.
func text(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
