// Package sqlite is Warren's persistent store: sandboxes, teams, API keys
// (hashed), snapshots, secrets (sealed), sandbox logs, metric samples and
// the warm pools' learned demand in one SQLite file (modernc.org/sqlite,
// pure Go) in WAL mode. It implements sandbox.Store with the records
// PostgreSQL's store shares (internal/store/sqlstore), and owns what is
// SQLite's own: the connection, the schema and its migrations, and the
// group commit of its one writer. It knows nothing of lifecycle rules,
// which belong to the lifecycle manager, its only writer of sandboxes.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store"
	"github.com/warrenhq/warren/internal/store/sqlstore"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DB is a Warren store backed by one SQLite file.
type DB struct {
	*sqlstore.Store
	db *sql.DB
	// writes takes writes to the writer goroutine (batch.go); closing
	// ends it, and writerDone says it ended.
	writes     chan *pendingWrite
	closing    chan struct{}
	writerDone chan struct{}
	closeOnce  sync.Once
}

var _ store.Store = (*DB)(nil)

// migrations are applied in order; PRAGMA user_version counts those done.
// Append only: never edit a migration that has shipped. The files their
// comments name are internal/store/sqlstore's, which reads and writes the
// tables.
var migrations = []string{
	`CREATE TABLE teams (
		id TEXT PRIMARY KEY,
		name TEXT NOT NULL,
		created_at INTEGER NOT NULL
	);
	CREATE TABLE api_keys (
		id TEXT PRIMARY KEY,
		team_id TEXT NOT NULL REFERENCES teams(id),
		name TEXT NOT NULL,
		hash TEXT NOT NULL UNIQUE,
		mask TEXT NOT NULL,
		created_at INTEGER NOT NULL
	);
	CREATE TABLE sandboxes (
		id TEXT PRIMARY KEY,
		team_id TEXT NOT NULL,
		state TEXT NOT NULL,
		started_at INTEGER NOT NULL,
		data TEXT NOT NULL
	);
	CREATE INDEX sandboxes_team_state ON sandboxes(team_id, state);
	CREATE TABLE snapshots (
		id TEXT PRIMARY KEY,
		team_id TEXT NOT NULL,
		sandbox_id TEXT NOT NULL,
		name TEXT NOT NULL,
		image TEXT NOT NULL,
		created_at INTEGER NOT NULL
	);
	CREATE TABLE sandbox_logs (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		sandbox_id TEXT NOT NULL,
		ts INTEGER NOT NULL,
		level TEXT NOT NULL,
		message TEXT NOT NULL,
		fields TEXT NOT NULL
	);
	CREATE INDEX sandbox_logs_ts ON sandbox_logs(sandbox_id, ts);
	CREATE TABLE sandbox_metrics (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		sandbox_id TEXT NOT NULL,
		ts INTEGER NOT NULL,
		data TEXT NOT NULL
	);
	CREATE INDEX sandbox_metrics_ts ON sandbox_metrics(sandbox_id, ts);`,
	// Templates, their builds, names, tags and build logs (templates.go).
	`CREATE TABLE templates (
		id TEXT PRIMARY KEY,
		team_id TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		data TEXT NOT NULL
	);
	CREATE TABLE template_names (
		name TEXT PRIMARY KEY,
		template_id TEXT NOT NULL
	);
	CREATE INDEX template_names_template ON template_names(template_id);
	CREATE TABLE template_builds (
		id TEXT PRIMARY KEY,
		template_id TEXT NOT NULL,
		status TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		data TEXT NOT NULL
	);
	CREATE INDEX template_builds_template ON template_builds(template_id, created_at);
	CREATE INDEX template_builds_status ON template_builds(status);
	CREATE TABLE template_tags (
		template_id TEXT NOT NULL,
		tag TEXT NOT NULL,
		build_id TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		PRIMARY KEY (template_id, tag)
	);
	CREATE TABLE template_build_logs (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		build_id TEXT NOT NULL,
		ts INTEGER NOT NULL,
		level TEXT NOT NULL,
		message TEXT NOT NULL,
		step TEXT NOT NULL
	);
	CREATE INDEX template_build_logs_build ON template_build_logs(build_id, seq);`,
	// The agent arguments of a snapshot's sandbox, as a JSON array (snapshots.go).
	`ALTER TABLE snapshots ADD COLUMN agent_args TEXT NOT NULL DEFAULT 'null';`,
	// Sandbox lifecycle events, webhooks and their deliveries (events.go).
	`CREATE TABLE sandbox_events (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		id TEXT NOT NULL UNIQUE,
		team_id TEXT NOT NULL,
		sandbox_id TEXT NOT NULL,
		ts INTEGER NOT NULL,
		data TEXT NOT NULL
	);
	CREATE INDEX sandbox_events_team ON sandbox_events(team_id, seq);
	CREATE INDEX sandbox_events_sandbox ON sandbox_events(team_id, sandbox_id, seq);
	CREATE INDEX sandbox_events_ts ON sandbox_events(ts);
	CREATE TABLE webhooks (
		id TEXT PRIMARY KEY,
		team_id TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		data TEXT NOT NULL
	);
	CREATE INDEX webhooks_team ON webhooks(team_id, created_at);
	CREATE TABLE webhook_deliveries (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		id TEXT NOT NULL UNIQUE,
		webhook_id TEXT NOT NULL,
		event_id TEXT NOT NULL,
		sandbox_id TEXT NOT NULL,
		status TEXT NOT NULL,
		next_attempt INTEGER NOT NULL,
		data TEXT NOT NULL
	);
	CREATE INDEX webhook_deliveries_due ON webhook_deliveries(status, next_attempt);
	CREATE INDEX webhook_deliveries_order ON webhook_deliveries(webhook_id, sandbox_id, status, seq);
	CREATE INDEX webhook_deliveries_event ON webhook_deliveries(event_id);`,
	// The dashboard's single-use login links and its sessions
	// (internal/web); only hashes of their tokens are kept.
	`CREATE TABLE dashboard_logins (
		hash TEXT PRIMARY KEY,
		team_id TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
		expires_at INTEGER NOT NULL
	);
	CREATE TABLE dashboard_sessions (
		hash TEXT PRIMARY KEY,
		team_id TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
		csrf TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		expires_at INTEGER NOT NULL
	);`,
	// Volumes, one name per team (volumes.go).
	`CREATE TABLE volumes (
		id TEXT PRIMARY KEY,
		team_id TEXT NOT NULL,
		name TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		UNIQUE (team_id, name)
	);`,
	// Secrets, one name per team; only the current version's value,
	// sealed by internal/secrets (secrets.go).
	`CREATE TABLE secrets (
		id TEXT PRIMARY KEY,
		team_id TEXT NOT NULL,
		name TEXT NOT NULL,
		version INTEGER NOT NULL,
		metadata TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		sealed BLOB NOT NULL,
		UNIQUE (team_id, name)
	);`,
	// The warm pools' learned demand, per template, kept across restarts
	// (pooldemand.go); peaks is a JSON array of {at, size}.
	`CREATE TABLE pool_demand (
		template_id TEXT PRIMARY KEY,
		team_id TEXT NOT NULL,
		peaks TEXT NOT NULL
	);`,
	// Whether a dashboard session is the operator's (dashboard.go).
	`ALTER TABLE dashboard_sessions ADD COLUMN operator INTEGER NOT NULL DEFAULT 0;`,
	// The agent identity a snapshot's memory image holds, as JSON; 'null'
	// = filesystem only (snapshots.go).
	`ALTER TABLE snapshots ADD COLUMN memory TEXT NOT NULL DEFAULT 'null';`,
	// Each team's quota, the JSON of a sandbox.Quota (keys.go).
	`ALTER TABLE teams ADD COLUMN quota TEXT NOT NULL DEFAULT '{}';`,
}

// Open opens (creating if needed) the store at path, migrates it, and
// makes sure the default team exists. path ":memory:" gives a private
// in-memory store.
func Open(ctx context.Context, path string) (*DB, error) {
	dsn := "file:" + url.PathEscape(path) + "?_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)"
	if path != ":memory:" {
		dsn += "&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
		if err := ownerOnly(path); err != nil {
			return nil, err
		}
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	// One connection: writes are serialised anyway, and it keeps an
	// in-memory database one database.
	db.SetMaxOpenConns(1)
	s := &DB{db: db, writes: make(chan *pendingWrite), closing: make(chan struct{}), writerDone: make(chan struct{})}
	s.Store = sqlstore.New(driver{querier{db}, s}, sqlstore.Dialect{Unique: unique})
	go s.writer()
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if _, err := s.GetTeam(ctx, sandbox.DefaultTeamID); sandbox.KindOf(err) == sandbox.KindNotFound {
		err = s.PutTeam(ctx, sandbox.Team{ID: sandbox.DefaultTeamID, Name: "default", CreatedAt: time.Now()})
		if err != nil {
			s.Close()
			return nil, err
		}
	} else if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// ownerOnly makes the database file 0600 before SQLite opens it, and its
// WAL and shared-memory files if they exist: they hold agent secrets,
// access tokens and webhook secrets in the clear. SQLite gives the files
// it makes next to a database the database file's mode.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("open store: %w", err)
		}
	}
	return nil
}

// Close stops the writer, after the writes it has taken, and closes the
// database.
func (s *DB) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		<-s.writerDone
	})
	return s.db.Close()
}

// SchemaVersion returns the number of migrations applied.
func (s *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	return v, err
}

func (s *DB) migrate(ctx context.Context) error {
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v > len(migrations) {
		return fmt.Errorf("store schema version %d is newer than this Warren (%d)", v, len(migrations))
	}
	for i := v; i < len(migrations); i++ {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		// PRAGMA takes no parameters; i+1 is ours, not input.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	return nil
}
