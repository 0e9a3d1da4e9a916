package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
)

func TestCreate(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{
		Template: "base", Secure: true, EnvVars: map[string]string{"A": "1"},
		Metadata: map[string]string{"k": "v"}, Network: sandbox.Network{AllowPublicTraffic: true},
	})
	if sb.State != sandbox.StateRunning || sb.Image != "warren/base" || sb.TemplateID != "base" {
		t.Errorf("created %+v, want running base", sb)
	}
	if _, err := sandbox.ParseID(sb.ID); err != nil || len(sb.ID) != 21 {
		t.Errorf("ID %q is not E2B-shaped", sb.ID)
	}
	if sb.EnvdAccessToken == "" || sb.TrafficAccessToken != "" {
		t.Errorf("tokens: envd %q traffic %q, want envd only", sb.EnvdAccessToken, sb.TrafficAccessToken)
	}
	init, ok := e.agent.Inited(sb.AgentAddr)
	want := sandbox.AgentInit{AgentSecret: sb.AgentSecret, EnvVars: map[string]string{"A": "1"}, AccessToken: sb.EnvdAccessToken, DefaultUser: "user"}
	if diff := cmp.Diff(want, init); !ok || diff != "" {
		t.Errorf("agent init (-want +got):\n%s", diff)
	}
	c, _ := e.container(t, sb.ContainerID)
	if c.Labels[sandbox.LabelManaged] != "true" || c.Labels[sandbox.LabelSandbox] != sb.ID {
		t.Errorf("labels = %v", c.Labels)
	}
	if got := e.state(t, sb.ID); got.State != sandbox.StateRunning {
		t.Errorf("stored state %s", got.State)
	}

	img := e.create(t, CreateRequest{Template: "python:3.12"})
	// The image in full, which the engine cannot take for an ID prefix.
	if img.Image != "docker.io/library/python:3.12" || img.TemplateID != "python:3.12" || img.EnvdAccessToken != "" || img.TrafficAccessToken == "" {
		t.Errorf("image sandbox %+v: want image docker.io/library/python:3.12, template python:3.12, no envd token, a traffic token", img)
	}

	for _, tc := range []struct {
		name string
		req  CreateRequest
		kind sandbox.Kind
	}{
		{"unknown template", CreateRequest{Template: "nosuch"}, sandbox.KindNotFound},
		{"malformed template", CreateRequest{Template: "Bad Name!"}, sandbox.KindInvalid},
		{"zero timeout", CreateRequest{Template: "base", Timeout: -time.Second}, sandbox.KindInvalid},
		{"huge timeout", CreateRequest{Template: "base", Timeout: 25 * time.Hour}, sandbox.KindInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.TeamID = team
			if tc.req.Timeout == 0 {
				tc.req.Timeout = time.Minute
			}
			_, err := e.m.Create(ctx, tc.req)
			wantKind(t, tc.name, err, tc.kind)
		})
	}
}

func TestCreateFailureLeaksNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(*env)
	}{
		{"runtime create fails", func(e *env) { e.rt.Fail("Create", errors.New("engine down")) }},
		{"agent init fails", func(e *env) { e.agent.Fail(errors.New("no answer")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			tc.break_(e)
			_, err := e.m.Create(context.Background(), CreateRequest{TeamID: team, Template: "base", Timeout: time.Minute})
			wantKind(t, "create", err, sandbox.KindInternal)
			if cs := e.rt.Containers(); len(cs) != 0 {
				t.Errorf("containers left: %v", cs)
			}
			if all, _ := e.store.ListSandboxes(context.Background(), sandbox.SandboxFilter{}); len(all) != 0 {
				t.Errorf("records left: %v", all)
			}
		})
	}
}

// leavingClient is an agent whose Init happens as the client gives up on
// its create: it cancels the client's context and records whether the
// context it was given ended with it.
type leavingClient struct {
	*fake.Agent
	leave   context.CancelFunc
	initErr error
}

func (a *leavingClient) Init(ctx context.Context, addr string, init sandbox.AgentInit) error {
	a.leave()
	a.initErr = ctx.Err()
	return a.Agent.Init(ctx, addr, init)
}

func TestCreateOutlivesItsClient(t *testing.T) {
	client, leave := context.WithCancel(context.Background())
	defer leave()
	agent := &leavingClient{Agent: fake.NewAgent(), leave: leave}
	e := newEnv(t, func(c *config) { c.Agent = agent })
	_, err := e.m.Create(client, CreateRequest{TeamID: team, Template: "base", Timeout: time.Minute})
	wantKind(t, "create", err, sandbox.KindUnavailable)
	if agent.initErr != nil {
		t.Errorf("the engine's work was cut short with the client: %v", agent.initErr)
	}
	if cs := e.rt.Containers(); len(cs) != 0 {
		t.Errorf("containers left: %v", cs)
	}
	all, _ := e.store.ListSandboxes(context.Background(), sandbox.SandboxFilter{})
	for _, sb := range all {
		if sb.State != sandbox.StateKilled {
			t.Errorf("sandbox %s left %s", sb.ID, sb.State)
		}
	}
}

func TestTransitions(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{Template: "base", Timeout: time.Hour})

	// Pause (frozen), then everything a paused sandbox refuses.
	if err := e.m.Pause(ctx, team, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	if c, _ := e.container(t, sb.ContainerID); !c.Paused {
		t.Error("container not frozen after pause")
	}
	got := e.state(t, sb.ID)
	if got.State != sandbox.StatePaused || got.PauseMode != sandbox.PauseFrozen || got.Remaining <= 59*time.Minute {
		t.Errorf("paused record: state %s mode %s remaining %v", got.State, got.PauseMode, got.Remaining)
	}
	wantKind(t, "pause paused", e.m.Pause(ctx, team, sb.ID, true), sandbox.KindConflict)
	wantKind(t, "timeout on paused", e.m.SetTimeout(ctx, team, sb.ID, time.Minute), sandbox.KindNotFound)
	wantKind(t, "refresh paused", e.m.Refresh(ctx, team, sb.ID, time.Minute), sandbox.KindNotFound)
	if got := e.stopped(); !slices.Equal(got, []string{sb.ID, sb.ID}) {
		t.Errorf("OnStop calls = %v, want [%[2]s %[2]s] (before and after the pause)", got, sb.ID)
	}

	// Connect resumes (201) and keeps what was left when it is longer.
	res, resumed, err := e.m.Connect(ctx, team, sb.ID, time.Minute, true)
	if err != nil || !resumed {
		t.Fatalf("connect paused: resumed=%v err=%v", resumed, err)
	}
	if left := time.Until(res.EndAt); left < 59*time.Minute {
		t.Errorf("resume shortened the sandbox to %v", left)
	}
	// Connect on running (200) never shortens.
	res2, resumed, err := e.m.Connect(ctx, team, sb.ID, time.Second, true)
	if err != nil || resumed || res2.EndAt.Before(res.EndAt) {
		t.Errorf("connect running: resumed=%v err=%v endAt %v -> %v", resumed, err, res.EndAt, res2.EndAt)
	}
	_, err = e.m.Resume(ctx, team, sb.ID, time.Minute, ResumeOptions{})
	wantKind(t, "resume running", err, sandbox.KindConflict)

	// SetTimeout may shorten; Refresh may not.
	if err := e.m.SetTimeout(ctx, team, sb.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	if left := time.Until(e.state(t, sb.ID).EndAt); left > time.Minute {
		t.Errorf("set timeout left %v, want <= 1m", left)
	}
	if err := e.m.Refresh(ctx, team, sb.ID, time.Second); err != nil {
		t.Fatal(err)
	}
	if left := time.Until(e.state(t, sb.ID).EndAt); left < 50*time.Second {
		t.Errorf("refresh shortened to %v", left)
	}

	// Pause without memory stops; resume restarts and re-inits the agent.
	if err := e.m.Pause(ctx, team, sb.ID, false); err != nil {
		t.Fatal(err)
	}
	if c, _ := e.container(t, sb.ContainerID); c.Running {
		t.Error("container still running after stop-pause")
	}
	res, err = e.m.Resume(ctx, team, sb.ID, time.Minute, ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.AgentAddr == sb.AgentAddr {
		t.Errorf("agent address unchanged after restart: %s", res.AgentAddr)
	}
	if _, ok := e.agent.Inited(res.AgentAddr); !ok {
		t.Error("agent not re-initialised after restart")
	}

	// Other teams and bad IDs see nothing.
	_, err = e.m.Get(ctx, "other", sb.ID)
	wantKind(t, "get other team", err, sandbox.KindNotFound)
	wantKind(t, "kill other team", e.m.Kill(ctx, "other", sb.ID), sandbox.KindNotFound)
	wantKind(t, "kill unknown", e.m.Kill(ctx, team, "nonexisting"), sandbox.KindNotFound)

	// Kill, then it is gone.
	if err := e.m.Kill(ctx, team, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.container(t, sb.ContainerID); ok {
		t.Error("container survives kill")
	}
	wantKind(t, "kill killed", e.m.Kill(ctx, team, sb.ID), sandbox.KindNotFound)
	_, _, err = e.m.Connect(ctx, team, sb.ID, time.Minute, true)
	wantKind(t, "connect killed", err, sandbox.KindNotFound)
	if e.state(t, sb.ID).State != sandbox.StateKilled {
		t.Error("killed sandbox not recorded as killed")
	}
}

func TestPauseFailureKeepsState(t *testing.T) {
	e := newEnv(t, nil)
	sb := e.create(t, CreateRequest{Template: "base"})
	e.rt.Fail("Freeze", errors.New("boom"))
	wantKind(t, "pause", e.m.Pause(context.Background(), team, sb.ID, true), sandbox.KindInternal)
	if got := e.state(t, sb.ID).State; got != sandbox.StateRunning {
		t.Errorf("state after failed pause = %s, want running", got)
	}
}

func TestRoute(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	plain := e.create(t, CreateRequest{Template: "base"})
	auto := e.create(t, CreateRequest{Template: "base", Lifecycle: sandbox.Lifecycle{AutoResume: true}})

	if got, err := e.m.Route(ctx, plain.ID, nil); err != nil || got.ID != plain.ID {
		t.Errorf("route running: %v", err)
	}
	for _, id := range []string{plain.ID, auto.ID} {
		if err := e.m.Pause(ctx, team, id, true); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.m.Route(ctx, plain.ID, nil)
	wantKind(t, "route paused", err, sandbox.KindUnavailable)
	refused := errors.New("no token")
	if _, err := e.m.Route(ctx, auto.ID, func(sandbox.Sandbox) error { return refused }); err != refused {
		t.Errorf("route refused by admit: err %v, want admit's", err)
	}
	if st := e.state(t, auto.ID).State; st != sandbox.StatePaused {
		t.Errorf("a request admit refused resumed the sandbox: state %s", st)
	}
	got, err := e.m.Route(ctx, auto.ID, nil)
	if err != nil || got.State != sandbox.StateRunning {
		t.Errorf("route auto-resume: state %s err %v", got.State, err)
	}
	_, err = e.m.Route(ctx, "nosuch", nil)
	wantKind(t, "route unknown", err, sandbox.KindNotFound)
	e.m.Kill(ctx, team, plain.ID)
	_, err = e.m.Route(ctx, plain.ID, nil)
	wantKind(t, "route killed", err, sandbox.KindNotFound)
}

func TestUpdateNetwork(t *testing.T) {
	e := newEnv(t, nil)
	sb := e.create(t, CreateRequest{Template: "base", Network: sandbox.Network{AllowPublicTraffic: true, AllowOut: []string{"10.0.0.1"}}})
	n := sandbox.Network{DenyOut: []string{"0.0.0.0/0"}}
	if err := e.m.UpdateNetwork(context.Background(), team, sb.ID, n); err != nil {
		t.Fatal(err)
	}
	got := e.state(t, sb.ID).Network
	want := sandbox.Network{AllowPublicTraffic: true, DenyOut: []string{"0.0.0.0/0"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("network (-want +got):\n%s", diff)
	}
}

// Connect and Resume with keepMemory false reboot a paused sandbox on its
// filesystem: the frozen container is stopped and started afresh, and its
// agent is initialised again.
func TestResumeWithoutMemoryReboots(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resume func(e *env, id string) (sandbox.Sandbox, error)
	}{
		{"connect", func(e *env, id string) (sandbox.Sandbox, error) {
			sb, resumed, err := e.m.Connect(context.Background(), team, id, time.Minute, false)
			if err == nil && !resumed {
				err = errors.New("not resumed")
			}
			return sb, err
		}},
		{"resume", func(e *env, id string) (sandbox.Sandbox, error) {
			return e.m.Resume(context.Background(), team, id, time.Minute, ResumeOptions{Reboot: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			sb := e.create(t, CreateRequest{Template: "base", Timeout: time.Hour})
			if err := e.m.Pause(context.Background(), team, sb.ID, true); err != nil {
				t.Fatal(err)
			}
			calls := len(e.rt.Calls())
			res, err := tc.resume(e, sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			var ops []string
			for _, c := range e.rt.Calls()[calls:] {
				op, _, _ := strings.Cut(c, " ")
				ops = append(ops, op)
			}
			if want := []string{"Stop", "Start"}; !slices.Equal(ops, want) {
				t.Errorf("runtime calls = %v, want %v (no thaw: memory is discarded)", ops, want)
			}
			if _, ok := e.agent.Inited(res.AgentAddr); !ok {
				t.Error("agent not initialised after the reboot")
			}
			if got := e.state(t, sb.ID); got.State != sandbox.StateRunning || got.PauseMode != "" {
				t.Errorf("state %s mode %q after reboot", got.State, got.PauseMode)
			}
		})
	}
}

func TestTemplateRequiresGVisor(t *testing.T) {
	e := newEnv(t, nil)
	e.rt.Rebuild("secure:1")
	e.rt.SetImageLabels("secure:1", map[string]string{sandbox.LabelRuntime: "gvisor"})
	sb := e.create(t, CreateRequest{TeamID: team, Template: "secure:1", Timeout: time.Minute})
	if sb.Runtime != sandbox.RuntimeGVisor {
		t.Errorf("sandbox runtime %q, want gvisor", sb.Runtime)
	}
	if rt, _ := e.rt.RuntimeOf(sb.ContainerID); rt != sandbox.RuntimeGVisor {
		t.Errorf("container runtime %q, want gvisor", rt)
	}

	// A label cannot lower the server's isolation, nor name nonsense.
	e.rt.Rebuild("plain:1")
	e.rt.SetImageLabels("plain:1", map[string]string{sandbox.LabelRuntime: "runc"})
	if sb := e.create(t, CreateRequest{TeamID: team, Template: "plain:1", Timeout: time.Minute}); sb.Runtime != sandbox.RuntimeRunc {
		t.Errorf("runc-labelled sandbox runtime %q", sb.Runtime)
	}
	e.rt.Rebuild("odd:1")
	e.rt.SetImageLabels("odd:1", map[string]string{sandbox.LabelRuntime: "kata"})
	_, err := e.m.Create(context.Background(), CreateRequest{TeamID: team, Template: "odd:1", Timeout: time.Minute})
	wantKind(t, "create with an unknown runtime label", err, sandbox.KindInvalid)

	// An engine without gVisor: a clear refusal, and nothing made.
	e.rt.Lack(sandbox.RuntimeGVisor)
	before := len(e.rt.Containers())
	_, err = e.m.Create(context.Background(), CreateRequest{TeamID: team, Template: "secure:1", Timeout: time.Minute})
	wantKind(t, "create needing a missing runtime", err, sandbox.KindInvalid)
	if !strings.Contains(sandbox.Message(err), "needs the gvisor runtime") {
		t.Errorf("message: %s", sandbox.Message(err))
	}
	if len(e.rt.Containers()) != before {
		t.Error("a container was made for a template the engine cannot run")
	}
}
