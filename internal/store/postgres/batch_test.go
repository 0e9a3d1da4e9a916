package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlstore"
	"github.com/warrenhq/warren/internal/store/storetest"
)

// insertLog is a write of one log line of sandbox id.
func insertLog(id string) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO sandbox_logs (sandbox_id, ts, level, message, fields) VALUES ($1, 1, 'info', 'm', '{}')`, id)
		return err
	}
}

// Writes that queue while one is committed go in one transaction; one of
// them that fails changes nothing and fails alone; one whose context ended
// before its turn is not run.
func TestWritesBatch(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	// Every writer busy with a write of its own, until release: what
	// follows queues.
	release := make(chan struct{})
	var released sync.Once
	letGo := func() { released.Do(func() { close(release) }) }
	t.Cleanup(letGo)
	held := make(chan struct{}, writers)
	firsts := make(chan error, writers)
	for i := range writers {
		go func() {
			firsts <- s.write(ctx, sandboxOf(i), func(ctx context.Context, tx pgx.Tx) error {
				held <- struct{}{}
				<-release
				return insertLog(fmt.Sprintf("first-%d", i))(ctx, tx)
			})
		}()
	}
	for range writers {
		<-held
	}
	gone, cancel := context.WithCancel(ctx)
	writes := map[string]func(context.Context, pgx.Tx) error{
		"ok-1": insertLog("ok-1"),
		"ok-2": insertLog("ok-2"),
		"fails": func(ctx context.Context, tx pgx.Tx) error {
			if err := insertLog("fails")(ctx, tx); err != nil {
				return err
			}
			return errors.New("refused after its insert")
		},
		"bad sql": func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO no_such_table VALUES (1)`)
			return err
		},
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := map[string]error{}
	for name, fn := range writes {
		wg.Go(func() {
			err := s.write(ctx, sandboxOf(0), fn)
			mu.Lock()
			errs[name] = err
			mu.Unlock()
		})
	}
	cancelled := make(chan error, 1)
	go func() { cancelled <- s.write(gone, sandboxOf(0), insertLog("cancelled")) }()
	// The writers take nothing while they hold the first writes: wait
	// until every other write waits for them, then let go.
	storetest.WaitQueued(t, len(writes)+1)
	cancel()
	letGo()
	wg.Wait()
	for range writers {
		if err := <-firsts; err != nil {
			t.Fatal(err)
		}
	}
	storetest.WantWrites(t, <-cancelled, errs, map[string]bool{"ok-1": true, "ok-2": true, "fails": false, "bad sql": false})
	storetest.WantLogLines(t, s, map[string]int{"first-0": 1, "first-3": 1, "ok-1": 1, "ok-2": 1, "fails": 0, "cancelled": 0})
}

// A write after Close is refused.
func TestWriteAfterClose(t *testing.T) {
	s := open(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSandbox(t.Context(), sandbox.Sandbox{ID: "late", TeamID: sandbox.DefaultTeamID}); !errors.Is(err, sqlstore.ErrClosed) {
		t.Errorf("a write after Close returned %v, want sqlstore.ErrClosed", err)
	}
}

// sandboxOf returns a sandbox ID whose writes go through writer i.
func sandboxOf(i int) string { return sandboxesOf(i, 1)[0] }

// sandboxesOf returns n sandbox IDs whose writes go through writer i.
func sandboxesOf(i, n int) []string {
	var out []string
	for k := 0; len(out) < n; k++ {
		if id := fmt.Sprintf("i%d", k); writerOf(id) == i {
			out = append(out, id)
		}
	}
	return out
}

// A batch of statements the server refuses one of (an event whose ID is
// taken) runs again without it: the others land, that one fails alone.
func TestPipelineRefused(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	ids := sandboxesOf(0, 4)
	taken := sandbox.Event{ID: "e1", TeamID: sandbox.DefaultTeamID, SandboxID: ids[0], Type: sandbox.EventCreated, Time: time.Unix(1700000000, 0).UTC()}
	if err := s.AddEvent(ctx, taken, nil); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var released sync.Once
	letGo := func() { released.Do(func() { close(release) }) }
	t.Cleanup(letGo)
	held := make(chan struct{})
	go s.write(ctx, ids[0], func(ctx context.Context, tx pgx.Tx) error {
		close(held)
		<-release
		return nil
	})
	<-held
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			if i == 0 {
				again := taken
				again.SandboxID = id
				errs[i] = s.AddEvent(ctx, again, nil)
				return
			}
			errs[i] = s.PutSandbox(ctx, sandbox.Sandbox{ID: id, TeamID: sandbox.DefaultTeamID, State: sandbox.StateRunning})
		})
	}
	storetest.WaitQueued(t, len(ids))
	letGo()
	wg.Wait()
	if errs[0] == nil {
		t.Error("an event whose ID is taken was stored")
	}
	for i, id := range ids[1:] {
		if errs[i+1] != nil {
			t.Errorf("put %s beside a refused write: %v", id, errs[i+1])
		}
		if _, err := s.GetSandbox(ctx, id); err != nil {
			t.Errorf("sandbox %s: %v", id, err)
		}
	}
}
