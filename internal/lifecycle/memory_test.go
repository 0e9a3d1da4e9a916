package lifecycle

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
)

// memoryEngine is the fake with a MemoryCloner whose restores are plain
// creates, recording what it was asked.
type memoryEngine struct {
	*fake.Runtime

	mu       sync.Mutex
	images   map[string]bool // guarded by mu
	saved    []string        // guarded by mu
	restored []string        // guarded by mu
}

func (e *memoryEngine) SaveMemory(ctx context.Context, id, key string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.images[key], e.saved = true, append(e.saved, key)
	return nil
}

// CreateFromMemory creates the container and removes it again when ready
// fails or the image is missing, as the Docker engine's does.
func (e *memoryEngine) CreateFromMemory(ctx context.Context, spec sandbox.ContainerSpec, key string, ready func(context.Context) error) (sandbox.Container, error) {
	c, err := e.Runtime.Create(ctx, spec)
	if err != nil {
		return sandbox.Container{}, err
	}
	if ready != nil {
		err = ready(ctx)
	}
	e.mu.Lock()
	if err == nil && !e.images[key] {
		err = sandbox.Errorf(sandbox.KindNotFound, "no memory image %s", key)
	}
	if err == nil {
		e.restored = append(e.restored, key)
	}
	e.mu.Unlock()
	if err != nil {
		e.Runtime.Remove(context.WithoutCancel(ctx), c.ID)
		return sandbox.Container{}, err
	}
	return c, nil
}

func (e *memoryEngine) DeleteMemory(ctx context.Context, key string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.images, key)
	return nil
}

func (e *memoryEngine) MemoryImages(ctx context.Context) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var keys []string
	for k := range e.images {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

func (e *memoryEngine) kept() []string {
	keys, _ := e.MemoryImages(context.Background())
	return keys
}

func logText(t *testing.T, m *Manager, id string) string {
	t.Helper()
	entries, err := m.Logs(context.Background(), team, id, sandbox.LogQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e.Message + " memory=" + e.Fields["memory"] + "\n")
	}
	return b.String()
}

func newMemoryEngine(rt *fake.Runtime) *memoryEngine {
	return &memoryEngine{Runtime: rt, images: map[string]bool{}}
}

// newGVisorMemoryEnv is an env whose sandboxes run under gVisor on a
// memoryEngine, which it returns too.
func newGVisorMemoryEnv(t *testing.T) (*env, *memoryEngine) {
	var eng *memoryEngine
	e := newEnv(t, func(c *config) {
		eng = newMemoryEngine(c.Runtime.(*fake.Runtime))
		c.Runtime = eng
		c.SandboxRuntime = sandbox.RuntimeGVisor
	})
	return e, eng
}

// TestMemoryWhereNotKept: under runc (on an engine that could keep a
// gVisor sandbox's memory) an explicit request for memory is refused
// naming gVisor and changes nothing; a snapshot that did not ask, and a
// fork, carry the filesystem and say so in the log.
func TestMemoryWhereNotKept(t *testing.T) {
	e := newEnv(t, func(c *config) {
		c.Runtime = newMemoryEngine(c.Runtime.(*fake.Runtime))
	})
	ctx := context.Background()
	src := e.create(t, CreateRequest{})
	images := len(e.rt.Images())

	_, err := e.m.Snapshot(ctx, team, src.ID, "", MemoryRequired)
	wantKind(t, "snapshot with memory", err, sandbox.KindInvalid)
	if !strings.Contains(sandbox.Message(err), "gVisor") {
		t.Errorf("refusal %q does not name gVisor", sandbox.Message(err))
	}
	if n := len(e.rt.Images()); n != images {
		t.Errorf("%d images after a refused snapshot, want %d", n, images)
	}
	sn, err := e.m.Snapshot(ctx, team, src.ID, "", MemoryIfPossible)
	if err != nil || sn.Memory != nil {
		t.Fatalf("snapshot = %+v, %v; want one without memory", sn, err)
	}
	if got := logText(t, e.m, src.ID); !strings.Contains(got, "snapshot created (filesystem only: the sandbox runs under runc") {
		t.Errorf("source's log:\n%s", got)
	}
	forks, err := e.m.Fork(ctx, team, src.ID, time.Minute, 1)
	if err != nil || forks[0].Err != nil {
		t.Fatalf("fork: %v %v", err, forks)
	}
	if got := logText(t, e.m, forks[0].Sandbox.ID); !strings.Contains(got, "forked with its source's filesystem only: the sandbox runs under runc") ||
		!strings.Contains(got, "memory=false") {
		t.Errorf("fork's log:\n%s", got)
	}
}

// TestForkWithMemory: under gVisor a fork saves one memory image, restores
// every fork from it (each agent proving the source's identity to be given
// its own), and deletes it; the source runs on, thawed.
func TestForkWithMemory(t *testing.T) {
	e, eng := newGVisorMemoryEnv(t)
	ctx := context.Background()
	src := e.create(t, CreateRequest{Secure: true})
	forks, err := e.m.Fork(ctx, team, src.ID, time.Minute, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(eng.saved) != 1 || len(eng.restored) != 3 || eng.restored[0] != eng.saved[0] {
		t.Errorf("saved %v, restored %v; want one image restored 3 times", eng.saved, eng.restored)
	}
	if kept := eng.kept(); len(kept) != 0 {
		t.Errorf("memory images left after the fork: %v", kept)
	}
	tokens := map[string]bool{src.EnvdAccessToken: true}
	for _, f := range forks {
		if f.Err != nil {
			t.Fatal(f.Err)
		}
		init, _ := e.agent.Inited(f.Sandbox.AgentAddr)
		want := sandbox.AgentIdentity{AgentSecret: src.AgentSecret, AccessToken: src.EnvdAccessToken}
		if diff := cmp.Diff(want, init.Restored); diff != "" {
			t.Errorf("fork's init proves (-want +got):\n%s", diff)
		}
		if init.AgentSecret == src.AgentSecret || tokens[init.AccessToken] {
			t.Errorf("fork %s was not given its own secret and token", f.Sandbox.ID)
		}
		tokens[init.AccessToken] = true
		if got := logText(t, e.m, f.Sandbox.ID); !strings.Contains(got, "forked with its source's memory and processes memory=true") {
			t.Errorf("fork's log:\n%s", got)
		}
	}
	if c, _ := e.container(t, src.ContainerID); !c.Running || c.Paused {
		t.Errorf("source's container %+v, want running, thawed", c)
	}
	if got := e.state(t, src.ID); got.State != sandbox.StateRunning {
		t.Errorf("source %s, want running", got.State)
	}
}

// filesEngine is a memoryEngine that keeps a fork's files with its memory
// image, or says it cannot (filesErr).
type filesEngine struct {
	*memoryEngine
	filesErr error
	files    []string // keys given files; guarded by memoryEngine.mu
}

func (e *filesEngine) SaveFiles(ctx context.Context, id, key string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.images[key] {
		return sandbox.Errorf(sandbox.KindNotFound, "no memory image %s", key)
	}
	if e.filesErr != nil {
		return e.filesErr
	}
	e.files = append(e.files, key)
	return nil
}

// TestForkCopiesFiles: where the engine keeps a fork's files with its
// memory image, the forks run the source's image and nothing is
// committed; where it cannot, the fork commits as before.
func TestForkCopiesFiles(t *testing.T) {
	for _, tc := range []struct {
		name       string
		filesErr   error
		wantCommit bool
	}{
		{"copied", nil, false},
		{"too large to copy", sandbox.Errorf(sandbox.KindUnavailable, "too large"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var eng *filesEngine
			e := newEnv(t, func(c *config) {
				eng = &filesEngine{memoryEngine: newMemoryEngine(c.Runtime.(*fake.Runtime)), filesErr: tc.filesErr}
				c.Runtime = eng
				c.SandboxRuntime = sandbox.RuntimeGVisor
			})
			ctx := context.Background()
			src := e.create(t, CreateRequest{})
			images := len(e.rt.Images())
			forks, err := e.m.Fork(ctx, team, src.ID, time.Minute, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range forks {
				if f.Err != nil {
					t.Fatal(f.Err)
				}
				if got := f.Sandbox.Image == src.Image; got == tc.wantCommit {
					t.Errorf("fork runs %s, source %s; want a commit %v", f.Sandbox.Image, src.Image, tc.wantCommit)
				}
			}
			if committed := len(e.rt.Images()) > images; committed != tc.wantCommit {
				t.Errorf("images %d → %d; want a commit %v", images, len(e.rt.Images()), tc.wantCommit)
			}
			if len(eng.saved) != 1 || len(eng.restored) != 2 {
				t.Errorf("saved %v, restored %v; want one image restored twice", eng.saved, eng.restored)
			}
			// The containers made during the capture for the source's
			// image are gone where it committed.
			if n := len(e.rt.Containers()); n != 3 {
				t.Errorf("%d containers after the fork, want the source's and two forks'", n)
			}
		})
	}
}

// TestForkCaptureFails: the containers a fork makes while capturing its
// source are removed, with their sandboxes, when the capture fails.
func TestForkCaptureFails(t *testing.T) {
	e := newEnv(t, func(c *config) {
		c.Runtime = &filesEngine{memoryEngine: newMemoryEngine(c.Runtime.(*fake.Runtime))}
		c.SandboxRuntime = sandbox.RuntimeGVisor
	})
	ctx := context.Background()
	src := e.create(t, CreateRequest{})
	e.rt.Fail("Freeze", sandbox.Errorf(sandbox.KindInternal, "frozen solid"))
	if _, err := e.m.Fork(ctx, team, src.ID, time.Minute, 3); err == nil {
		t.Fatal("fork of a sandbox that cannot be frozen succeeded")
	}
	if n := len(e.rt.Containers()); n != 1 {
		t.Errorf("%d containers after a failed fork, want the source's alone", n)
	}
	if all := e.m.snapshotAll(); len(all) != 1 || all[0].ID != src.ID {
		t.Errorf("sandboxes after a failed fork: %v, want the source alone", all)
	}
}

// TestForkOfCheckpointed: a sandbox paused to disk with its memory seeds
// a fork with its checkpoint, without being resumed.
func TestForkOfCheckpointed(t *testing.T) {
	e, eng := newGVisorMemoryEnv(t)
	ctx := context.Background()
	src := e.create(t, CreateRequest{})
	if mode, err := e.m.Stop(ctx, team, src.ID); err != nil || mode != sandbox.PauseCheckpointed {
		t.Fatalf("Stop = %q, %v; want checkpointed", mode, err)
	}
	forks, err := e.m.Fork(ctx, team, src.ID, time.Minute, 1)
	if err != nil || forks[0].Err != nil {
		t.Fatalf("fork: %v %v", err, forks)
	}
	if len(eng.saved) != 1 || len(eng.restored) != 1 {
		t.Errorf("saved %v, restored %v; want the checkpoint saved and restored once", eng.saved, eng.restored)
	}
	if got := logText(t, e.m, forks[0].Sandbox.ID); !strings.Contains(got, "memory=true") {
		t.Errorf("fork's log:\n%s", got)
	}
	if got := e.state(t, src.ID); got.State != sandbox.StatePaused || got.PauseMode != sandbox.PauseCheckpointed {
		t.Errorf("source %s %s, want paused checkpointed", got.State, got.PauseMode)
	}
}

// TestMemorySnapshotAndPrune: a snapshot keeps its memory image, which a
// sandbox of it is restored from; reconcile deletes what no snapshot and
// no fork in flight holds (a fork's left by a killed server, a deleted
// snapshot's) and keeps the rest.
func TestMemorySnapshotAndPrune(t *testing.T) {
	e, eng := newGVisorMemoryEnv(t)
	ctx := context.Background()
	src := e.create(t, CreateRequest{})
	sn, err := e.m.Snapshot(ctx, team, src.ID, "", MemoryRequired)
	if err != nil || sn.Memory == nil || sn.Memory.AgentSecret != src.AgentSecret {
		t.Fatalf("snapshot = %+v, %v; want one with the source's identity", sn, err)
	}
	sb := e.create(t, CreateRequest{Template: sn.ID})
	if init, _ := e.agent.Inited(sb.AgentAddr); init.Restored.AgentSecret != src.AgentSecret {
		t.Errorf("sandbox of the snapshot was not restored from its memory: %+v", init)
	}
	plain, err := e.m.Snapshot(ctx, team, src.ID, "", MemoryNone)
	if err != nil || plain.Memory != nil {
		t.Fatalf("snapshot with memory: false = %+v, %v", plain, err)
	}
	eng.SaveMemory(ctx, src.ContainerID, forkKeyPrefix+"left")
	if err := e.m.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{sn.ID}, eng.kept()); diff != "" {
		t.Errorf("memory images after reconcile (-want +got):\n%s", diff)
	}
	if err := e.m.DeleteSnapshot(ctx, team, sn.ID); err != nil {
		t.Fatal(err)
	}
	if kept := eng.kept(); len(kept) != 0 {
		t.Errorf("memory images after the snapshot's deletion: %v", kept)
	}
}

// failingSaves is a memoryEngine whose memory images cannot be saved.
type failingSaves struct{ *memoryEngine }

func (failingSaves) SaveMemory(context.Context, string, string) error {
	return sandbox.Errorf(sandbox.KindUnavailable, "no room for it")
}

// TestMemoryThatCannotBeSaved: a fork whose memory cannot be saved carries
// the filesystem and says why; a snapshot that requires memory fails.
func TestMemoryThatCannotBeSaved(t *testing.T) {
	e := newEnv(t, func(c *config) {
		c.Runtime = failingSaves{newMemoryEngine(c.Runtime.(*fake.Runtime))}
		c.SandboxRuntime = sandbox.RuntimeGVisor
	})
	ctx := context.Background()
	src := e.create(t, CreateRequest{})
	_, err := e.m.Snapshot(ctx, team, src.ID, "", MemoryRequired)
	wantKind(t, "snapshot with memory", err, sandbox.KindInternal)
	forks, err := e.m.Fork(ctx, team, src.ID, time.Minute, 1)
	if err != nil || forks[0].Err != nil {
		t.Fatalf("fork: %v %v", err, forks)
	}
	if got := logText(t, e.m, forks[0].Sandbox.ID); !strings.Contains(got, "filesystem only: its memory could not be saved (no room for it) memory=false") {
		t.Errorf("fork's log:\n%s", got)
	}
	if c, _ := e.container(t, src.ContainerID); !c.Running || c.Paused {
		t.Errorf("source's container %+v, want running, thawed", c)
	}
}
