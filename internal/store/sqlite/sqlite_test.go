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
)

func open(t *testing.T) *DB {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)

func TestSandboxRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	sb := sandbox.Sandbox{
		ID: "iabc", TeamID: "default", TemplateID: "base", Image: "warren/base",
		State: sandbox.StatePaused, PauseMode: sandbox.PauseFrozen,
		Metadata: map[string]string{"k": "v"}, EnvVars: map[string]string{"A": "1"},
		StartedAt: t0, EndAt: t0.Add(time.Hour), PausedAt: t0.Add(time.Minute), Remaining: 59 * time.Minute,
		AgentArgs: []string{"-code-interpreter"},
		Lifecycle: sandbox.Lifecycle{OnTimeout: sandbox.TimeoutPause, AutoResume: true},
		Network: sandbox.Network{AllowOut: []string{"1.1.1.1"}, EgressProxy: &sandbox.EgressProxy{Address: "p:1"},
			Rules: map[string][]sandbox.NetworkRule{"x.com": {{Headers: map[string]string{"A": "b"}}}}},
	}
	if err := s.PutSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSandbox(ctx, "iabc")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sb, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	sb.State = sandbox.StateRunning
	if err := s.PutSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	other := sandbox.Sandbox{ID: "idef", TeamID: "t2", State: sandbox.StateRunning, StartedAt: t0.Add(-time.Hour)}
	if err := s.PutSandbox(ctx, other); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListSandboxes(ctx, sandbox.SandboxFilter{States: []sandbox.State{sandbox.StateRunning}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"idef", "iabc"}, ids(list)); diff != "" {
		t.Errorf("list order (-want +got):\n%s", diff)
	}
	list, _ = s.ListSandboxes(ctx, sandbox.SandboxFilter{TeamID: "default"})
	if diff := cmp.Diff([]string{"iabc"}, ids(list)); diff != "" {
		t.Errorf("team filter (-want +got):\n%s", diff)
	}
	if err := s.AppendLog(ctx, sandbox.LogEntry{SandboxID: "iabc", Time: t0, Level: "info", Message: "m"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSandbox(ctx, "iabc"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSandbox(ctx, "iabc"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("get deleted: err = %v, want not found", err)
	}
	if logs, _ := s.Logs(ctx, "iabc", sandbox.LogQuery{}); len(logs) != 0 {
		t.Errorf("logs survived delete: %v", logs)
	}
}

func ids(sbs []sandbox.Sandbox) []string {
	var out []string
	for _, sb := range sbs {
		out = append(out, sb.ID)
	}
	return out
}

func TestAPIKeys(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	k := sandbox.APIKey{ID: "k1", TeamID: sandbox.DefaultTeamID, Name: "ci", Hash: sandbox.HashAPIKey("e2b_00"), Mask: "e2b_…00", CreatedAt: t0}
	if err := s.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	got, err := s.APIKeyByHash(ctx, k.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(k, got); diff != "" {
		t.Errorf("key (-want +got):\n%s", diff)
	}
	if err := s.CreateAPIKey(ctx, sandbox.APIKey{ID: "k2", TeamID: "nope", Hash: "h"}); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("key of unknown team: err = %v, want not found", err)
	}
	list, _ := s.ListAPIKeys(ctx)
	if len(list) != 1 {
		t.Errorf("list = %v, want one key", list)
	}
	if err := s.DeleteAPIKey(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAPIKey(ctx, "k1"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("second revoke: err = %v, want not found", err)
	}
	if _, err := s.APIKeyByHash(ctx, k.Hash); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("revoked key still found: %v", err)
	}
}

func TestSnapshots(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	a := sandbox.Snapshot{ID: "s1", TeamID: "default", SandboxID: "i1", Name: "n", Image: "warren/snapshot:s1", CreatedAt: t0,
		AgentArgs: []string{"-code-interpreter"}}
	b := sandbox.Snapshot{ID: "s2", TeamID: "default", SandboxID: "i2", Image: "img", CreatedAt: t0.Add(time.Second)}
	c := sandbox.Snapshot{ID: "s3", TeamID: "other", SandboxID: "i1", Image: "img", CreatedAt: t0}
	for _, sn := range []sandbox.Snapshot{a, b, c} {
		if err := s.PutSnapshot(ctx, sn); err != nil {
			t.Fatal(err)
		}
	}
	all, _ := s.ListSnapshots(ctx, "default", "")
	if diff := cmp.Diff([]sandbox.Snapshot{a, b}, all); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	one, _ := s.ListSnapshots(ctx, "default", "i1")
	if diff := cmp.Diff([]sandbox.Snapshot{a}, one); diff != "" {
		t.Errorf("by sandbox (-want +got):\n%s", diff)
	}
	if got, _ := s.GetSnapshot(ctx, "s1"); !cmp.Equal(a, got) {
		t.Errorf("get (-want +got):\n%s", cmp.Diff(a, got))
	}
	if err := s.DeleteSnapshot(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSnapshot(ctx, "s1"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("deleted snapshot: err = %v", err)
	}
}

func TestLogsAndMetrics(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	for i := range 5 {
		e := sandbox.LogEntry{SandboxID: "i1", Time: t0.Add(time.Duration(i) * time.Second), Level: "info", Message: string(rune('a' + i)), Fields: map[string]string{"i": "x"}}
		if err := s.AppendLog(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.Logs(ctx, "i1", sandbox.LogQuery{Since: t0.Add(time.Second), Limit: 2})
	if diff := cmp.Diff([]string{"b", "c"}, messages(got)); diff != "" {
		t.Errorf("forward (-want +got):\n%s", diff)
	}
	got, _ = s.Logs(ctx, "i1", sandbox.LogQuery{Until: t0.Add(3 * time.Second), Backward: true, Limit: 2})
	if diff := cmp.Diff([]string{"d", "c"}, messages(got)); diff != "" {
		t.Errorf("backward (-want +got):\n%s", diff)
	}
	for i := range 5 {
		st := sandbox.Stats{Time: t0.Add(time.Duration(i) * time.Second), CPUUsedPct: float64(i)}
		if err := s.AddMetric(ctx, "i1", st, 3); err != nil {
			t.Fatal(err)
		}
	}
	ms, _ := s.Metrics(ctx, "i1", time.Time{}, time.Time{})
	var pct []float64
	for _, m := range ms {
		pct = append(pct, m.CPUUsedPct)
	}
	// History beyond keep is thinned to one a minute (metrics_test.go).
	if diff := cmp.Diff([]float64{0, 1, 2, 3, 4}, pct); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	ms, _ = s.Metrics(ctx, "i1", t0.Add(3*time.Second), t0.Add(3*time.Second))
	if len(ms) != 1 || !ms[0].Time.Equal(t0.Add(3*time.Second)) {
		t.Errorf("range query = %v, want the sample at +3s", ms)
	}
}

func messages(es []sandbox.LogEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Message)
	}
	return out
}

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

func TestPoolDemand(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	if got, err := s.PoolDemand(ctx); err != nil || len(got) != 0 {
		t.Fatalf("demand of a new store = %v, %v; want none", got, err)
	}
	a := sandbox.PoolDemand{TemplateID: "base", TeamID: "default",
		Peaks: []sandbox.DemandPeak{{At: t0, Size: 50}, {At: t0.Add(time.Minute), Size: 10}}}
	b := sandbox.PoolDemand{TemplateID: "tpl1", TeamID: "t2",
		Peaks: []sandbox.DemandPeak{{At: t0, Size: 3}}}
	if err := s.SavePoolDemand(ctx, []sandbox.PoolDemand{b, a}); err != nil {
		t.Fatal(err)
	}
	got, err := s.PoolDemand(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]sandbox.PoolDemand{a, b}, got); diff != "" {
		t.Errorf("demand (-want +got):\n%s", diff)
	}
	// A save replaces: what it leaves out is gone.
	if err := s.SavePoolDemand(ctx, []sandbox.PoolDemand{b}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.PoolDemand(ctx); !cmp.Equal([]sandbox.PoolDemand{b}, got) {
		t.Errorf("after a second save (-want +got):\n%s", cmp.Diff([]sandbox.PoolDemand{b}, got))
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
