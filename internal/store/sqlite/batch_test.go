package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlstore"
	"github.com/warrenhq/warren/internal/store/storetest"
)

// insertLog is a write of one log line of sandbox id.
func insertLog(id string) func(context.Context, *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sandbox_logs (sandbox_id, ts, level, message, fields) VALUES (?, 1, 'info', 'm', '{}')`, id)
		return err
	}
}

// Writes that queue while one is committed go in one transaction; one of
// them that fails changes nothing and fails alone; one whose context ended
// before its turn is not run.
func TestWritesBatch(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	held, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
			close(held)
			<-release
			return insertLog("first")(ctx, tx)
		})
	}()
	<-held // the writer is busy: what follows queues
	gone, cancel := context.WithCancel(ctx)
	writes := map[string]func(context.Context, *sql.Tx) error{
		"ok-1": insertLog("ok-1"),
		"ok-2": insertLog("ok-2"),
		"fails": func(ctx context.Context, tx *sql.Tx) error {
			if err := insertLog("fails")(ctx, tx); err != nil {
				return err
			}
			return errors.New("refused after its insert")
		},
		"bad sql": func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO no_such_table VALUES (1)`)
			return err
		},
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := map[string]error{}
	for name, fn := range writes {
		wg.Go(func() {
			err := s.write(ctx, fn)
			mu.Lock()
			errs[name] = err
			mu.Unlock()
		})
	}
	cancelled := make(chan error, 1)
	go func() { cancelled <- s.write(gone, insertLog("cancelled")) }()
	storetest.WaitQueued(t, len(writes)+1) // the writer takes nothing while it holds the first
	cancel()
	close(release)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	storetest.WantWrites(t, <-cancelled, errs, map[string]bool{"ok-1": true, "ok-2": true, "fails": false, "bad sql": false})
	storetest.WantLogLines(t, s, map[string]int{"first": 1, "ok-1": 1, "ok-2": 1, "fails": 0, "cancelled": 0})
}

// Many writers at once all land; a write after Close is refused.
func TestWritesConcurrentAndClosed(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Go(func() {
			sb := sandbox.Sandbox{ID: fmt.Sprintf("i%03d", i), TeamID: sandbox.DefaultTeamID, State: sandbox.StateRunning, StartedAt: time.Now()}
			if err := s.PutSandbox(ctx, sb); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	all, err := s.ListSandboxes(ctx, sandbox.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 300 {
		t.Errorf("%d sandboxes stored, want 300", len(all))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSandbox(ctx, sandbox.Sandbox{ID: "late", TeamID: sandbox.DefaultTeamID}); !errors.Is(err, sqlstore.ErrClosed) {
		t.Errorf("a write after Close returned %v, want sqlstore.ErrClosed", err)
	}
}
