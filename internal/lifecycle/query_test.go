package lifecycle

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sandbox"
)

func TestList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		ctx := context.Background()
		var ids []string
		for i, md := range []map[string]string{{"a": "1", "b": "2"}, {"a": "1"}, {"a": "2"}} {
			tpl := "base"
			if i == 2 {
				tpl = "python:3.12"
			}
			ids = append(ids, e.create(t, CreateRequest{Template: tpl, Metadata: md}).ID)
			time.Sleep(time.Second) // distinct start times
		}
		e.m.Pause(ctx, team, ids[1], true)
		e.create(t, CreateRequest{TeamID: "other", Template: "base"})
		killed := e.create(t, CreateRequest{Template: "base"})
		e.m.Kill(ctx, team, killed.ID)

		for _, tc := range []struct {
			name string
			req  ListRequest
			want []string
		}{
			{"default is running and paused, oldest first", ListRequest{}, ids},
			{"newest first", ListRequest{Descending: true}, []string{ids[2], ids[1], ids[0]}},
			{"running", ListRequest{States: []sandbox.State{sandbox.StateRunning}}, []string{ids[0], ids[2]}},
			{"paused", ListRequest{States: []sandbox.State{sandbox.StatePaused}}, []string{ids[1]}},
			{"metadata AND", ListRequest{Metadata: map[string]string{"a": "1", "b": "2"}}, []string{ids[0]}},
			{"metadata one", ListRequest{Metadata: map[string]string{"a": "1"}}, []string{ids[0], ids[1]}},
			{"template", ListRequest{Template: "python:3.12"}, []string{ids[2]}},
			{"started after", ListRequest{StartedAfter: e.state(t, ids[0]).StartedAt}, []string{ids[1], ids[2]}},
		} {
			// No t.Run: subtests cannot run inside a synctest bubble.
			tc.req.TeamID = team
			got, next, err := e.m.List(ctx, tc.req)
			if err != nil || next != "" {
				t.Errorf("%s: err %v next %q", tc.name, err, next)
			}
			if diff := cmp.Diff(tc.want, idsOf(got)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.name, diff)
			}
		}

		for _, desc := range []bool{false, true} {
			var all []string
			token := ""
			for range 5 {
				page, next, err := e.m.List(ctx, ListRequest{TeamID: team, Limit: 2, NextToken: token, Descending: desc})
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, idsOf(page)...)
				if token = next; token == "" {
					break
				}
			}
			want := ids
			if desc {
				want = []string{ids[2], ids[1], ids[0]}
			}
			if diff := cmp.Diff(want, all); diff != "" {
				t.Errorf("paging desc=%v (-want +got):\n%s", desc, diff)
			}
		}
		_, _, err := e.m.List(ctx, ListRequest{TeamID: team, NextToken: "!!junk"})
		wantKind(t, "junk token", err, sandbox.KindInvalid)
	})
}

func idsOf(sbs []sandbox.Sandbox) []string {
	out := []string{}
	for _, sb := range sbs {
		out = append(out, sb.ID)
	}
	return out
}

func TestSnapshotsAndFork(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	src := e.create(t, CreateRequest{Template: "base", Secure: true, Metadata: map[string]string{"k": "v"}})

	sn, err := e.m.Snapshot(ctx, team, src.ID, "mine", MemoryIfPossible)
	if err != nil {
		t.Fatal(err)
	}
	if sn.SandboxID != src.ID || sn.Name != "mine" {
		t.Errorf("snapshot %+v", sn)
	}
	_, err = e.m.Snapshot(ctx, "other", src.ID, "", MemoryIfPossible)
	wantKind(t, "snapshot of other team's sandbox", err, sandbox.KindNotFound)
	for _, ref := range []string{sn.ID, sn.ID + ":default", "mine"} {
		sb := e.create(t, CreateRequest{Template: ref})
		if sb.Image != sn.Image || sb.TemplateID != sn.ID {
			t.Errorf("create from %q: image %s template %s", ref, sb.Image, sb.TemplateID)
		}
	}
	_, err = e.m.Create(ctx, CreateRequest{TeamID: "other", Template: sn.ID, Timeout: time.Minute})
	wantKind(t, "other team uses snapshot", err, sandbox.KindNotFound)
	// Nor by its image's name, which the engine has: Warren's own images
	// are no template of their own, for any team.
	if !contains(e.rt.Images(), sn.Image) {
		t.Fatalf("snapshot image %s not on the engine: %v", sn.Image, e.rt.Images())
	}
	for _, ref := range []string{sn.Image, "docker.io/" + sn.Image, "warren/fork:x", "warren-template/t1:b1"} {
		for _, teamID := range []string{"other", team} {
			_, err = e.m.Create(ctx, CreateRequest{TeamID: teamID, Template: ref, Timeout: time.Minute})
			wantKind(t, teamID+" creates from image "+ref, err, sandbox.KindNotFound)
		}
	}
	list, _ := e.m.Snapshots(ctx, team, src.ID, "")
	if len(list) != 1 {
		t.Errorf("snapshots of sandbox = %v", list)
	}
	if list, _ := e.m.Snapshots(ctx, team, "", "nope"); len(list) != 0 {
		t.Errorf("snapshots named nope = %v", list)
	}
	if err := e.m.DeleteSnapshot(ctx, team, sn.ID); err != nil {
		t.Fatal(err)
	}
	wantKind(t, "delete again", e.m.DeleteSnapshot(ctx, team, sn.ID), sandbox.KindNotFound)

	forks, err := e.m.Fork(ctx, team, src.ID, time.Minute, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(forks) != 2 || forks[0].Err != nil || forks[1].Err != nil || forks[0].Sandbox.ID == forks[1].Sandbox.ID {
		t.Fatalf("forks = %+v", forks)
	}
	f := forks[0].Sandbox
	if f.Metadata["k"] != "v" || f.EnvdAccessToken == "" || f.EnvdAccessToken == src.EnvdAccessToken {
		t.Errorf("fork %+v: want inherited metadata and its own token", f)
	}
	if e.state(t, src.ID).State != sandbox.StateRunning {
		t.Error("fork source stopped running")
	}
	// The fork image goes when its last sandbox does.
	e.m.Kill(ctx, team, forks[0].Sandbox.ID)
	if !contains(e.rt.Images(), f.Image) {
		t.Error("fork image removed while a fork still lives")
	}
	e.m.Kill(ctx, team, forks[1].Sandbox.ID)
	if contains(e.rt.Images(), f.Image) {
		t.Error("fork image left after its forks died")
	}
	_, err = e.m.Fork(ctx, team, src.ID, time.Minute, 0)
	wantKind(t, "fork count 0", err, sandbox.KindInvalid)
	_, err = e.m.Fork(ctx, team, "nosuch", time.Minute, 1)
	wantKind(t, "fork unknown", err, sandbox.KindNotFound)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestMetricsAndLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *config) { c.MetricsInterval = 5 * time.Second })
		ctx := context.Background()
		sb := e.create(t, CreateRequest{Template: "base"})
		start := time.Now()
		time.Sleep(22 * time.Second)
		synctest.Wait()
		all, err := e.m.Metrics(ctx, team, sb.ID, time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 4 {
			t.Fatalf("got %d samples, want one every 5 s", len(all))
		}
		some, _ := e.m.Metrics(ctx, team, sb.ID, start.Add(19*time.Second), start.Add(21*time.Second))
		if len(some) != 1 || !some[0].Time.Equal(start.Add(20*time.Second)) {
			t.Errorf("range query = %v, want the sample at +20s", some)
		}
		latest, _ := e.m.LatestMetrics(ctx, team, []string{sb.ID, "nosuch"})
		if _, ok := latest[sb.ID]; !ok || len(latest) != 1 {
			t.Errorf("latest = %v", latest)
		}
		_, err = e.m.Metrics(ctx, "other", sb.ID, time.Time{}, time.Time{})
		wantKind(t, "metrics of other team", err, sandbox.KindNotFound)

		e.m.Pause(ctx, team, sb.ID, true)
		e.m.Kill(ctx, team, sb.ID)
		logs, err := e.m.Logs(ctx, team, sb.ID, sandbox.LogQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var msgs []string
		for _, l := range logs {
			msgs = append(msgs, l.Message)
		}
		want := []string{"sandbox created", "sandbox paused", "sandbox killed"}
		if diff := cmp.Diff(want, msgs); diff != "" {
			t.Errorf("log (-want +got):\n%s", diff)
		}
		e.stop()
	})
}

// BenchmarkList500 pages through 500 running sandboxes 100 at a time, as
// `Sandbox.list()` does (bench/idle measures the same through HTTP).
func BenchmarkList500(b *testing.B) {
	e := newEnv(b, nil)
	e.m.mu.Lock()
	t0 := time.Now()
	for i := range 500 {
		sb := sandbox.Sandbox{ID: sandbox.NewID(), TeamID: team, TemplateID: "base", State: sandbox.StateRunning,
			StartedAt: t0.Add(time.Duration(i) * time.Millisecond), EndAt: t0.Add(time.Hour), Metadata: map[string]string{"bench": "idle"}}
		e.m.sandboxes[sb.ID] = sb
	}
	e.m.mu.Unlock()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		req := ListRequest{TeamID: team, Limit: 100, Descending: true}
		seen := 0
		for {
			page, next, err := e.m.List(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			seen += len(page)
			if next == "" {
				break
			}
			req.NextToken = next
		}
		if seen != 500 {
			b.Fatalf("listed %d of 500", seen)
		}
	}
}

// Find looks among the running and paused sandboxes of every team, and
// never at a killed one.
func TestFind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		ctx := context.Background()
		paused := e.create(t, CreateRequest{Template: "base"})
		e.m.Pause(ctx, team, paused.ID, true)
		other := e.create(t, CreateRequest{TeamID: "other", Template: "base"})
		killed := e.create(t, CreateRequest{Template: "base"})
		e.m.Kill(ctx, team, killed.ID)
		for _, want := range []string{paused.ID, other.ID} {
			if got, err := e.m.Find(ctx, func(sb sandbox.Sandbox) bool { return sb.ID == want }); got != want || err != nil {
				t.Errorf("Find(%s) = %q, %v", want, got, err)
			}
		}
		if got, err := e.m.Find(ctx, func(sb sandbox.Sandbox) bool { return sb.ID == killed.ID }); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Errorf("Find(killed) = %q, %v", got, err)
		}
	})
}
