package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

func intp(n int) *int { return &n }

// setQuota gives team a quota in the store, making the team if new.
func (e *env) setQuota(t *testing.T, teamID string, q sandbox.Quota) {
	t.Helper()
	ctx := context.Background()
	if err := e.store.PutTeam(ctx, sandbox.Team{ID: teamID, Name: teamID, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetTeamQuota(ctx, teamID, q); err != nil {
		t.Fatal(err)
	}
}

// TestQuotaBurst: 50 creates at once against a quota of 5 leave exactly
// 5 sandboxes, and the 45 others are refused with a message that names
// the limit, and a Retry-After.
func TestQuotaBurst(t *testing.T) {
	e := newEnv(t, nil)
	e.setQuota(t, "a", sandbox.Quota{MaxSandboxes: intp(5)})
	var (
		wg                sync.WaitGroup
		mu                sync.Mutex
		created, refused  int
		otherErr, lastMsg string
	)
	for range 50 {
		wg.Go(func() {
			_, err := e.m.Create(context.Background(), CreateRequest{TeamID: "a", Timeout: time.Minute})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case sandbox.KindOf(err) == sandbox.KindLimited && sandbox.RetryAfter(err) > 0:
				refused++
				lastMsg = sandbox.Message(err)
			default:
				otherErr = err.Error()
			}
		})
	}
	wg.Wait()
	if created != 5 || refused != 45 || otherErr != "" {
		t.Errorf("created %d, refused %d (other error %q); want 5 and 45", created, refused, otherErr)
	}
	if want := "team 'a' has 5 of 5 sandboxes running"; lastMsg != want {
		t.Errorf("refusal = %q, want %q", lastMsg, want)
	}
	if u := e.m.TeamUsage()["a"]; u.Sandboxes != 5 {
		var states []string
		for _, sb := range e.m.snapshotAll() {
			states = append(states, fmt.Sprintf("%s %s %s", sb.ID, sb.State, sb.PauseMode))
		}
		t.Errorf("usage = %+v, want 5 sandboxes; the cache: %v", u, states)
	}
	// Another team is not held by a's quota.
	e.create(t, CreateRequest{TeamID: "b"})
}

// TestQuotaCountsRunningAndFrozen: a frozen sandbox holds its place, one
// paused to disk gives it up and may not resume past the quota; the
// quota changed in the store holds at once.
func TestQuotaCountsRunningAndFrozen(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.setQuota(t, "a", sandbox.Quota{MaxSandboxes: intp(1)})
	first := e.create(t, CreateRequest{TeamID: "a"})
	if err := e.m.Pause(ctx, "a", first.ID, true); err != nil {
		t.Fatal(err)
	}
	_, err := e.m.Create(ctx, CreateRequest{TeamID: "a", Timeout: time.Minute})
	wantKind(t, "create beside a frozen sandbox", err, sandbox.KindLimited)
	// A frozen sandbox resumes at the quota: it holds its place.
	if _, err := e.m.Resume(ctx, "a", first.ID, time.Minute, ResumeOptions{}); err != nil {
		t.Fatalf("resume of a frozen sandbox at the quota: %v", err)
	}
	if err := e.m.Pause(ctx, "a", first.ID, false); err != nil { // stopped
		t.Fatal(err)
	}
	e.create(t, CreateRequest{TeamID: "a"})
	_, err = e.m.Resume(ctx, "a", first.ID, time.Minute, ResumeOptions{})
	wantKind(t, "resume past the quota", err, sandbox.KindLimited)
	if sb := e.state(t, first.ID); sb.State != sandbox.StatePaused {
		t.Errorf("refused resume left the sandbox %s, want paused", sb.State)
	}
	e.setQuota(t, "a", sandbox.Quota{MaxSandboxes: intp(2)})
	if _, err := e.m.Resume(ctx, "a", first.ID, time.Minute, ResumeOptions{}); err != nil {
		t.Errorf("resume once the quota was raised: %v", err)
	}
}

// TestQuotaResources: memory, vCPUs and disk are refused before anything
// starts, naming the use.
func TestQuotaResources(t *testing.T) {
	e := newEnv(t, func(c *config) { c.TeamLimits = sandbox.Limits{MaxVCPUs: 3} })
	ctx := context.Background()
	e.create(t, CreateRequest{TeamID: "a"}) // 2 vCPUs, 512 MiB
	before := len(e.rt.Containers())
	_, err := e.m.Create(ctx, CreateRequest{TeamID: "a", Timeout: time.Minute})
	wantKind(t, "create past the server's default vCPUs", err, sandbox.KindLimited)
	if want := "team 'a' uses 2 of 3 vCPUs, and the sandbox needs 2"; sandbox.Message(err) != want {
		t.Errorf("refusal = %q, want %q", sandbox.Message(err), want)
	}
	e.setQuota(t, "a", sandbox.Quota{MaxVCPUs: intp(0), MaxMemoryMB: intp(1000)})
	_, err = e.m.Create(ctx, CreateRequest{TeamID: "a", Timeout: time.Minute})
	if !strings.Contains(sandbox.Message(err), "512 of 1000 MiB of memory") {
		t.Errorf("memory refusal = %v", err)
	}
	if n := len(e.rt.Containers()); n != before {
		t.Errorf("refused creates left %d containers, want %d", n, before)
	}
}

// TestQuotaCreateRate: a team of 2 creates a second starts 2 at once,
// then one every half second.
func TestQuotaCreateRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *config) { c.TeamLimits = sandbox.Limits{MaxCreatesPerSecond: 2} })
		ctx := context.Background()
		e.create(t, CreateRequest{TeamID: "a"})
		e.create(t, CreateRequest{TeamID: "a"})
		_, err := e.m.Create(ctx, CreateRequest{TeamID: "a", Timeout: time.Minute})
		wantKind(t, "third create in a second", err, sandbox.KindLimited)
		if d := sandbox.RetryAfter(err); d <= 0 || d > 500*time.Millisecond {
			t.Errorf("Retry-After = %s, want (0, 500ms]", d)
		}
		time.Sleep(500 * time.Millisecond)
		e.create(t, CreateRequest{TeamID: "a"})
		e.stop()
	})
}

// TestDrain: a draining server refuses creates with a Retry-After and
// keeps its sandboxes.
func TestDrain(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{})
	e.m.SetDraining(true)
	_, err := e.m.Create(ctx, CreateRequest{TeamID: team, Timeout: time.Minute})
	wantKind(t, "create while draining", err, sandbox.KindUnavailable)
	if sandbox.RetryAfter(err) != DrainRetry {
		t.Errorf("Retry-After = %s, want %s", sandbox.RetryAfter(err), DrainRetry)
	}
	if _, err := e.m.Get(ctx, team, sb.ID); err != nil {
		t.Errorf("sandbox while draining: %v", err)
	}
	e.m.SetDraining(false)
	e.create(t, CreateRequest{})
}

// TestServerFull: once the sandboxes of every team reserve the server's
// memory, a create of any team is refused with 503's kind and a
// Retry-After before anything starts; a sandbox paused to disk makes
// room, and a frozen one does not.
func TestServerFull(t *testing.T) {
	e := newEnv(t, func(c *config) { c.ServerMemoryMB, c.MemoryMB = 1200, 512 })
	ctx := context.Background()
	a := e.create(t, CreateRequest{TeamID: "a"})
	b := e.create(t, CreateRequest{TeamID: "b"})
	before := len(e.rt.Containers())
	_, err := e.m.Create(ctx, CreateRequest{TeamID: "c", Timeout: time.Minute})
	wantKind(t, "create on a full server", err, sandbox.KindUnavailable)
	if want := "this server is full: its sandboxes reserve 1024 of its 1200 MiB of memory, and this one needs 512"; sandbox.Message(err) != want {
		t.Errorf("refusal = %q, want %q", sandbox.Message(err), want)
	}
	if sandbox.RetryAfter(err) != FullRetry {
		t.Errorf("Retry-After = %s, want %s", sandbox.RetryAfter(err), FullRetry)
	}
	if n := len(e.rt.Containers()); n != before {
		t.Errorf("the refused create left %d containers, want %d", n, before)
	}
	if err := e.m.Pause(ctx, "a", a.ID, true); err != nil { // frozen: its memory stays reserved
		t.Fatal(err)
	}
	_, err = e.m.Create(ctx, CreateRequest{TeamID: "c", Timeout: time.Minute})
	wantKind(t, "create beside a frozen sandbox", err, sandbox.KindUnavailable)
	if err := e.m.Pause(ctx, "b", b.ID, false); err != nil { // stopped: its memory is free
		t.Fatal(err)
	}
	e.create(t, CreateRequest{TeamID: "c"})
}
