package warmpool

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
)

// The tests drive a Pool as the lifecycle manager does (a create counts in
// the demand and claims; reconcile hands it what it finds) on the fake
// engine and agent, without a manager.

const (
	baseImage = "warren/base"
	ciImage   = "warren/code-interpreter"
	ciID      = "code-interpreter-v1"
	baseFloor = 2
)

var ciArgs = []string{"-code-interpreter"}

// settings are the server's defaults, with a base pool of size base and a
// code-interpreter pool of size ci (Auto, 0 or a size).
func settings(base, ci int) Settings {
	return Settings{
		Builtin: []Builtin{
			{Template: "base", Image: baseImage, Size: base, Floor: baseFloor},
			{Template: ciID, Image: ciImage, AgentArgs: ciArgs, Optional: true, Size: ci, Floor: 1, MemoryMB: 80},
		},
		NoPool:      []string{"mcp-gateway"},
		Learn:       base == Auto,
		BudgetMB:    1024,
		CPUCount:    2,
		MemoryMB:    512,
		DiskSizeMB:  10240,
		PidsLimit:   4096,
		Runtime:     sandbox.RuntimeRunc,
		InitTimeout: 30 * time.Second,
	}
}

// autoPool is settings with auto-sized pools sharing budgetMB.
func autoPool(budgetMB int) Settings {
	s := settings(Auto, 0)
	s.BudgetMB = budgetMB
	return s
}

type env struct {
	p     *Pool
	rt    *fake.Runtime
	agent *fake.Agent
	deps  Deps
	set   Settings
	tpls  *templates
	store *demandStore

	mu      sync.Mutex      // guards claimed
	claimed map[string]bool // the containers claimed, by ID
}

// newEnv starts a pool of set on a fake engine holding images; tweak may
// change its deps. In a synctest bubble, call it inside the bubble.
func newEnv(t *testing.T, set Settings, tweak func(*Deps), images ...string) *env {
	t.Helper()
	if len(images) == 0 {
		images = []string{baseImage, "python:3.12"}
	}
	rt := fake.New(images...)
	e := &env{rt: rt, agent: fake.NewAgent(), set: set, tpls: &templates{rt: rt, resources: map[string][2]int{}},
		store: &demandStore{}, claimed: map[string]bool{}}
	e.deps = Deps{Runtime: rt, Agent: e.agent, Store: e.store, Templates: e.tpls}
	if tweak != nil {
		tweak(&e.deps)
	}
	e.start(t)
	t.Cleanup(e.stop)
	return e
}

// start starts a pool that adopts the containers a previous one left
// before it starts, as the manager's Start reconciles first.
func (e *env) start(t *testing.T) {
	t.Helper()
	e.p = New(e.deps, e.set)
	e.reconcile(t)
	e.p.Start(context.Background())
}

// stop closes the pool and removes its containers; safe to call twice.
func (e *env) stop() {
	if e.p != nil {
		e.p.Close()
		e.p.Empty(context.Background())
		e.p = nil
	}
}

// restart closes the pool, leaving its containers, and starts another on
// the same engine and store, as a restart of a server with live
// sandboxes does; down is how long the server is down.
func (e *env) restart(t *testing.T, down time.Duration) {
	t.Helper()
	e.p.Close()
	advance(down)
	e.start(t)
	synctest.Wait()
}

// reconcile does with the pool what the manager's reconcile does: it
// hands it every container labelled as its own that no claim took, then
// has it prune what stopped or vanished.
func (e *env) reconcile(t *testing.T) {
	t.Helper()
	list, err := e.rt.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]sandbox.Container{}
	for _, c := range list {
		seen[c.ID] = c
	}
	for _, c := range e.pooled() {
		e.p.Adopt(context.Background(), c)
	}
	e.p.Prune(context.Background(), seen)
}

// sandboxOf is what a create of template would make, as far as the pool
// is concerned.
func (e *env) sandboxOf(t *testing.T, template string) sandbox.Sandbox {
	t.Helper()
	sb, err := e.tpls.Resolve(context.Background(), sandbox.DefaultTeamID, template)
	if err != nil {
		t.Fatal(err)
	}
	sb.ID, sb.TeamID, sb.Runtime = sandbox.NewID(), sandbox.DefaultTeamID, e.set.Runtime
	if rt, err := e.tpls.Runtime(context.Background(), sb.TemplateID, sb.Image); err == nil && rt != "" {
		sb.Runtime = rt
	}
	return sb
}

// create does with the pool what a create of template does, and returns
// the container it claimed ("" for a miss, which a create makes cold).
func (e *env) create(t *testing.T, template string) string {
	t.Helper()
	sb := e.sandboxOf(t, template)
	defer e.p.Begin(sb)()
	c, ok := e.claim(t, sb)
	if !ok {
		return ""
	}
	c.Settled()
	c.Done()
	return c.Container.ID
}

// claim claims a container for sb, as a create does.
func (e *env) claim(t *testing.T, sb sandbox.Sandbox) (*Claim, bool) {
	t.Helper()
	kind, ok := e.p.KindOf(sb)
	if !ok {
		return nil, false
	}
	imageID, err := e.rt.ImageID(context.Background(), sb.Image)
	if err != nil {
		return nil, false
	}
	c, ok := e.p.Claim(sb.TeamID, kind, imageID, sb.Runtime)
	if ok {
		e.mu.Lock()
		e.claimed[c.Container.ID] = true
		e.mu.Unlock()
	}
	return c, ok
}

// burst makes n creates of template at once and returns the containers
// they claimed.
func (e *env) burst(t *testing.T, n int, template string) []string {
	t.Helper()
	var ends []func()
	var out []string
	for range n {
		sb := e.sandboxOf(t, template)
		ends = append(ends, e.p.Begin(sb))
		if c, ok := e.claim(t, sb); ok {
			c.Settled()
			c.Done()
			out = append(out, c.Container.ID)
		}
	}
	for _, end := range ends {
		end()
	}
	return out
}

// pooled returns the containers labelled as the pool's that no claim
// took, in the engine's order.
func (e *env) pooled() []sandbox.Container {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []sandbox.Container
	for _, c := range e.rt.Containers() {
		if c.Labels[sandbox.LabelPool] == "true" && !e.claimed[c.ID] {
			out = append(out, c)
		}
	}
	return out
}

// pooledImage returns the IDs of the pooled containers that run image.
func (e *env) pooledImage(image string) map[string]bool {
	id, _ := e.rt.ImageIDOf(image)
	out := map[string]bool{}
	for _, c := range e.pooled() {
		if c.ImageID == id {
			out[c.ID] = true
		}
	}
	return out
}

// pooledOf returns the pooled containers whose agent runs with args.
func (e *env) pooledOf(args []string) []sandbox.Container {
	var out []sandbox.Container
	for _, c := range e.pooled() {
		if got, _ := e.rt.AgentArgsOf(c.ID); slices.Equal(got, args) {
			out = append(out, c)
		}
	}
	return out
}

// creates counts the engine's Create calls.
func (e *env) creates() int {
	n := 0
	for _, c := range e.rt.Calls() {
		if len(c) > 7 && c[:7] == "Create " {
			n++
		}
	}
	return n
}

func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// templates resolves templates as the manager does, for the fake
// engine's images: the built-in ones, and any image on the engine by its
// reference (with the resources set for it); a deleted one is not found. An image
// asks for gVisor with its sandbox.LabelRuntime label.
type templates struct {
	rt *fake.Runtime

	mu        sync.Mutex        // guards resources and deleted
	resources map[string][2]int // CPUs and MiB, by template
	deleted   []string
}

func (f *templates) set(template string, cpuCount, memoryMB int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resources[template] = [2]int{cpuCount, memoryMB}
}

func (f *templates) delete(template string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, template)
}

func (f *templates) Resolve(ctx context.Context, team, template string) (sandbox.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.Contains(f.deleted, template) {
		return sandbox.Sandbox{}, sandbox.Errorf(sandbox.KindNotFound, "template '%s' not found", template)
	}
	sb := sandbox.Sandbox{TemplateID: template, Image: template, CPUCount: 2, MemoryMB: 512}
	switch template {
	case "base":
		sb.Image = baseImage
	case ciID:
		sb.Image, sb.AgentArgs = ciImage, ciArgs
	default:
		if ok, err := f.rt.ImageExists(ctx, template); err != nil || !ok {
			return sandbox.Sandbox{}, sandbox.Errorf(sandbox.KindNotFound, "template '%s' not found", template)
		}
	}
	if r, ok := f.resources[template]; ok {
		sb.CPUCount, sb.MemoryMB = r[0], r[1]
	}
	return sb, nil
}

func (f *templates) Runtime(ctx context.Context, template, image string) (sandbox.OCIRuntime, error) {
	labels, err := f.rt.ImageLabels(ctx, image)
	if err != nil {
		return "", err
	}
	if labels[sandbox.LabelRuntime] == string(sandbox.RuntimeGVisor) {
		return sandbox.RuntimeGVisor, nil
	}
	return "", nil
}

// demandStore keeps the saved demand in memory.
type demandStore struct {
	mu sync.Mutex
	ds []sandbox.PoolDemand
}

func (s *demandStore) SavePoolDemand(ctx context.Context, ds []sandbox.PoolDemand) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ds = slices.Clone(ds)
	return nil
}

func (s *demandStore) PoolDemand(ctx context.Context) ([]sandbox.PoolDemand, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ds), nil
}

// saved returns the saved demand by template.
func (s *demandStore) saved() map[string]sandbox.PoolDemand {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]sandbox.PoolDemand{}
	for _, d := range s.ds {
		out[d.TemplateID] = d
	}
	return out
}
