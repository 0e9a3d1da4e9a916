package lifecycle

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sandbox"
)

// fakeFirewall records which sandboxes have rules, with which settings
// and for which team.
type fakeFirewall struct {
	mu       sync.Mutex // guards rules, teams and restores
	rules    map[string]sandbox.Network
	teams    map[string]string
	restores int
}

func (f *fakeFirewall) Apply(_ context.Context, id string, e sandbox.Egress) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules[id] = e.Network
	if f.teams == nil {
		f.teams = map[string]string{}
	}
	f.teams[id] = e.TeamID
	return nil
}

// rule returns the rules of sandbox id, and the team they are for.
func (f *fakeFirewall) rule(id string) (_ sandbox.Network, team string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.rules[id]
	return n, f.teams[id], ok
}

func (f *fakeFirewall) Remove(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.rules, id)
	return nil
}

func (f *fakeFirewall) Sync(_ context.Context, rules map[string]sandbox.Egress) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = map[string]sandbox.Network{}
	for id, e := range rules {
		f.rules[id] = e.Network
	}
	return nil
}

func (f *fakeFirewall) Restore(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restores++
	return nil
}

func (f *fakeFirewall) Uninstall(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = map[string]sandbox.Network{}
	return nil
}

func (f *fakeFirewall) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.rules))
}

// TestEgressFollowsContainer: a sandbox has rules exactly while its
// container holds an address (running or frozen), and they change with
// UpdateNetwork.
func TestEgressFollowsContainer(t *testing.T) {
	fw := &fakeFirewall{rules: map[string]sandbox.Network{}}
	e := newEnv(t, func(c *config) { c.Firewall = fw })
	ctx := context.Background()
	deny := sandbox.Network{AllowPublicTraffic: true, DenyOut: []string{"10.0.0.0/8"}}
	sb := e.create(t, CreateRequest{Template: "base", Network: deny})
	want := func(what string, ids ...string) {
		t.Helper()
		if got := fw.ids(); !slices.Equal(got, ids) {
			t.Errorf("%s: rules for %v, want %v", what, got, ids)
		}
	}
	want("after create", sb.ID)
	if diff := cmp.Diff(deny, fw.rules[sb.ID]); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if fw.teams[sb.ID] != team {
		t.Errorf("rules applied for team %q, want %q: the firewall opens neighbours by team", fw.teams[sb.ID], team)
	}

	closed := sandbox.Network{AllowInternetAccess: false, AllowOut: []string{"192.168.0.1"}}
	if err := e.m.UpdateNetwork(ctx, team, sb.ID, closed); err != nil {
		t.Fatal(err)
	}
	if got := fw.rules[sb.ID]; got.AllowInternetAccess || !slices.Equal(got.AllowOut, closed.AllowOut) || got.DenyOut != nil {
		t.Errorf("after UpdateNetwork the firewall has %+v", got)
	}

	if err := e.m.Pause(ctx, team, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	want("frozen", sb.ID)
	if _, err := e.m.Resume(ctx, team, sb.ID, time.Minute, ResumeOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Pause(ctx, team, sb.ID, false); err != nil {
		t.Fatal(err)
	}
	want("stopped")
	// Changing a stopped sandbox's rules stores them for its resume.
	if err := e.m.UpdateNetwork(ctx, team, sb.ID, deny); err != nil {
		t.Fatal(err)
	}
	want("stopped after UpdateNetwork")
	if _, err := e.m.Resume(ctx, team, sb.ID, time.Minute, ResumeOptions{}); err != nil {
		t.Fatal(err)
	}
	want("resumed", sb.ID)
	if diff := cmp.Diff(deny, fw.rules[sb.ID]); diff != "" {
		t.Errorf("rules after resume (-want +got):\n%s", diff)
	}

	other := e.create(t, CreateRequest{Template: "base"})
	// A restarted server rewrites everything (the fake runtime reports no
	// addresses, so nothing is kept) and restores on every reconcile.
	fw.rules["stale"] = sandbox.Network{}
	e.stop()
	e.start(t, func(c *config) { c.Firewall = fw })
	want("after restart")
	if err := e.m.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if fw.restores == 0 {
		t.Error("reconcile did not restore the firewall")
	}

	fw.Apply(ctx, other.ID, sandbox.Egress{})
	if err := e.m.Kill(ctx, team, other.ID); err != nil {
		t.Fatal(err)
	}
	want("killed")
}

func TestEgressValidation(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	_, err := e.m.Create(ctx, CreateRequest{TeamID: team, Template: "base", Timeout: time.Minute,
		Network: sandbox.Network{DenyOut: []string{"*.example.com"}}})
	wantKind(t, "create denying a domain", err, sandbox.KindInvalid)
	sb := e.create(t, CreateRequest{Template: "base"})
	err = e.m.UpdateNetwork(ctx, team, sb.ID, sandbox.Network{DenyOut: []string{"not an address"}})
	wantKind(t, "update with garbage", err, sandbox.KindInvalid)
	if got := e.state(t, sb.ID).Network.DenyOut; got != nil {
		t.Errorf("refused update stored denyOut %v", got)
	}
}
