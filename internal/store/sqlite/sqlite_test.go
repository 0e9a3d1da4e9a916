package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/storetest"
)

func open(tb testing.TB) *DB {
	tb.Helper()
	return storetest.Open(tb, func() (*DB, error) { return Open(context.Background(), filepath.Join(tb.TempDir(), "warren.db")) })
}

func opener(tb testing.TB) storetest.Store { return open(tb) }

// TestStore runs the stores' conformance suite.
func TestStore(t *testing.T) { storetest.Run(t, opener) }

// BenchmarkStore runs the stores' benchmarks; internal/store/postgres has
// the same, for one run of both: go test -run - -bench Store ./internal/store/...
func BenchmarkStore(b *testing.B) { storetest.Bench(b, opener) }

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)

func TestMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "warren.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.SchemaVersion(ctx); v != len(migrations) {
		t.Errorf("schema version = %d, want %d", v, len(migrations))
	}
	if err := s.PutSandbox(ctx, sandbox.Sandbox{ID: "i1", State: sandbox.StateRunning}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Reopening applies nothing twice and keeps the data.
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if _, err := s.GetSandbox(ctx, "i1"); err != nil {
		t.Errorf("sandbox lost across reopen: %v", err)
	}
	var mode string
	s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
	if mode != "wal" {
		t.Errorf("journal mode = %q, want wal", mode)
	}
	// A store from a newer Warren is refused rather than misread.
	s.db.ExecContext(ctx, "PRAGMA user_version = 999")
	s.Close()
	if _, err := Open(ctx, path); err == nil {
		t.Error("opening a newer schema succeeded")
	}
}

// TestMigrateSnapshots: snapshots stored before agent arguments were read
// back with none.
func TestMigrateSnapshots(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "warren.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(slices.Clone(migrations[:2]), "PRAGMA user_version = 2",
		`INSERT INTO snapshots (id, team_id, sandbox_id, name, image, created_at) VALUES ('s1', 'default', 'i1', '', 'img', 1)`) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := sandbox.Snapshot{ID: "s1", TeamID: "default", SandboxID: "i1", Image: "img", CreatedAt: time.Unix(0, 1).UTC()}
	if got, err := s.GetSnapshot(ctx, "s1"); err != nil || !cmp.Equal(want, got) {
		t.Errorf("old snapshot = %+v, %v; want %+v", got, err, want)
	}
}

// TestMigratePoolDemand: a store from before the pools' demand was kept
// opens with none, its sandboxes intact, and keeps demand saved after.
func TestMigratePoolDemand(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "warren.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	before := len(migrations) - 1
	for _, q := range append(slices.Clone(migrations[:before]), fmt.Sprintf("PRAGMA user_version = %d", before),
		`INSERT INTO sandboxes (id, team_id, state, started_at, data) VALUES ('i1', 'default', 'running', 1, '{"ID":"i1","State":"running"}')`) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.SchemaVersion(ctx); v != len(migrations) {
		t.Errorf("schema version = %d, want %d", v, len(migrations))
	}
	if _, err := s.GetSandbox(ctx, "i1"); err != nil {
		t.Errorf("sandbox lost in the migration: %v", err)
	}
	if got, err := s.PoolDemand(ctx); err != nil || len(got) != 0 {
		t.Errorf("demand after the migration = %v, %v; want none", got, err)
	}
	d := []sandbox.PoolDemand{{TemplateID: "base", TeamID: "default", Peaks: []sandbox.DemandPeak{{At: t0, Size: 4}}}}
	if err := s.SavePoolDemand(ctx, d); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, _ := s.PoolDemand(ctx); !cmp.Equal(d, got) {
		t.Errorf("demand across a reopen (-want +got):\n%s", cmp.Diff(d, got))
	}
}
