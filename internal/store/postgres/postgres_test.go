package postgres

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/storetest"
)

// envURL names the variable with the URL of a PostgreSQL server the tests
// may create a database in (scripts/ensure-postgres.sh starts one and
// prints it).
const envURL = "WARREN_TEST_POSTGRES"

// testDB is the URL of this run's own database, made by TestMain and
// dropped at its end; "" without envURL.
var testDB string

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	base := os.Getenv(envURL)
	if base == "" {
		return m.Run() // each test skips, or fails in CI (needPostgres)
	}
	ctx := context.Background()
	u, err := url.Parse(base)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: want a postgres:// URL: %v\n", envURL, err)
		return 1
	}
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s=%s: %v\n", envURL, base, err)
		return 1
	}
	defer admin.Close(ctx)
	name := fmt.Sprintf("warren_test_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		fmt.Fprintf(os.Stderr, "create the test database: %v\n", err)
		return 1
	}
	defer func() {
		if _, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "drop the test database %s: %v\n", name, err)
		}
	}()
	u.Path = "/" + name
	testDB = u.String()
	return m.Run()
}

// needPostgres skips tb without a server to test against, or fails it
// when CI is set: CI skips nothing for want of a component.
func needPostgres(tb testing.TB) {
	tb.Helper()
	if testDB != "" {
		return
	}
	msg := envURL + " is unset: no PostgreSQL to test against (scripts/ensure-postgres.sh starts one and prints the variable to export)"
	if os.Getenv("CI") != "" {
		tb.Fatal(msg + "; with CI set nothing is skipped")
	}
	tb.Skip(msg)
}

var schemas atomic.Int64

// freshURL returns the URL of a new, empty schema in the run's database:
// a store of its own for each test, without the cost of a database each.
func freshURL(tb testing.TB) string {
	tb.Helper()
	needPostgres(tb)
	ctx := context.Background()
	schema := fmt.Sprintf("t%d", schemas.Add(1))
	conn, err := pgx.Connect(ctx, testDB)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatal(err)
	}
	u, _ := url.Parse(testDB)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func open(tb testing.TB) *DB {
	tb.Helper()
	return storetest.Open(tb, func() (*DB, error) { return Open(context.Background(), freshURL(tb)) })
}

func opener(tb testing.TB) storetest.Store { return open(tb) }

// TestStore runs the stores' conformance suite.
func TestStore(t *testing.T) { storetest.Run(t, opener) }

// BenchmarkStore runs the stores' benchmarks; internal/store/sqlite has
// the same, for one run of both: go test -run - -bench Store ./internal/store/...
func BenchmarkStore(b *testing.B) { storetest.Bench(b, opener) }

func TestMigrations(t *testing.T) {
	ctx := t.Context()
	dsn := freshURL(t)
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := migrations()
	if v, _ := s.SchemaVersion(ctx); v != len(ms) || v == 0 {
		t.Errorf("schema version = %d, want %d", v, len(ms))
	}
	if err := s.PutSandbox(ctx, sandbox.Sandbox{ID: "i1", State: sandbox.StateRunning}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Reopening applies nothing twice and keeps the data.
	s, err = Open(ctx, dsn)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if _, err := s.GetSandbox(ctx, "i1"); err != nil {
		t.Errorf("sandbox lost across reopen: %v", err)
	}
	// A store from a newer Warren is refused rather than misread.
	if _, err := s.pool.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES (999, 'future')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(ctx, dsn); err == nil {
		s.Close()
		t.Error("opening a newer schema succeeded")
	}
}

// Replicas starting together on an empty database migrate it once.
func TestMigrateConcurrently(t *testing.T) {
	dsn := freshURL(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(t.Context(), dsn)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
}

func TestOpenBadURL(t *testing.T) {
	if _, err := Open(t.Context(), "postgres://[::1"); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("a malformed URL: %v, want invalid", err)
	}
}
