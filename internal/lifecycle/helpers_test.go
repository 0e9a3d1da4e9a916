package lifecycle

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

const team = sandbox.DefaultTeamID

type env struct {
	m     *Manager
	rt    *fake.Runtime
	agent *fake.Agent
	store *sqlite.DB
	dir   string

	mu    sync.Mutex // guards stops
	stops []string
}

// stopped returns the IDs OnStop was called with, in order.
func (e *env) stopped() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.stops)
}

// newEnv starts a manager on a fake runtime, a fake agent and a SQLite
// store in a temp dir. In a synctest bubble, call it inside the bubble.
func newEnv(t testing.TB, tweak func(*config)) *env {
	t.Helper()
	e := &env{rt: fake.New("warren/base", "python:3.12"), agent: fake.NewAgent(), dir: t.TempDir()}
	e.start(t, tweak)
	return e
}

func (e *env) start(t testing.TB, tweak func(*config)) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(e.dir, "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	e.store = st
	cfg := config{Deps{Runtime: e.rt, Agent: e.agent, Store: st, OnStop: func(id string) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.stops = append(e.stops, id)
	}}, testSettings()}
	if tweak != nil {
		tweak(&cfg)
	}
	m, err := New(cfg.Deps, cfg.Settings)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.m = m
	t.Cleanup(e.stop)
}

// testSettings are the defaults without warm pools, which tests that
// want one ask for.
func testSettings() Settings {
	s := DefaultSettings()
	s.WarmPool, s.WarmPoolCodeInterpreter = 0, 0
	return s
}

// stop closes the manager and store; safe to call twice.
func (e *env) stop() {
	if e.m != nil {
		e.m.Close()
		e.store.Close()
		e.m = nil
	}
}

func (e *env) create(t testing.TB, req CreateRequest) sandbox.Sandbox {
	t.Helper()
	if req.TeamID == "" {
		req.TeamID = team
	}
	if req.Timeout == 0 {
		req.Timeout = 5 * time.Minute
	}
	sb, err := e.m.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return sb
}

// state returns the sandbox as the store has it.
func (e *env) state(t *testing.T, id string) sandbox.Sandbox {
	t.Helper()
	sb, err := e.store.GetSandbox(context.Background(), id)
	if err != nil {
		t.Fatalf("store: %v", err)
	}
	return sb
}

func (e *env) container(t testing.TB, id string) (sandbox.Container, bool) {
	t.Helper()
	for _, c := range e.rt.Containers() {
		if c.ID == id {
			return c, true
		}
	}
	return sandbox.Container{}, false
}

func wantKind(t *testing.T, what string, err error, kind sandbox.Kind) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want kind %d", what, kind)
		return
	}
	if got := sandbox.KindOf(err); got != kind {
		t.Errorf("%s: kind %d (%v), want %d", what, got, err, kind)
	}
}
