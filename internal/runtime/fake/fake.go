// Package fake holds in-memory stand-ins for tests: a sandbox.Runtime whose
// containers are records and images a set, which reports container events
// on request (ReportEvents), and a sandbox.Agent that records what it was
// told. Any method can be scripted to fail. They run
// nothing and own no goroutines; they are not for production use.
package fake

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Runtime is an in-memory container engine. The zero value is not usable;
// call New.
type Runtime struct {
	mu         sync.Mutex // guards the fields below
	containers map[string]*sandbox.Container
	limits     map[string]Limits             // container ID → its resource limits
	agentArgs  map[string][]string           // container ID → the agent's arguments
	runtimes   map[string]sandbox.OCIRuntime // container ID → its runtime
	mounts     map[string][]sandbox.Mount    // container ID → its mounts
	// checkpoints holds the containers that have a checkpoint, with the
	// agent address they had when checkpointed.
	checkpoints map[string]string
	images      map[string]string            // reference → image ID; several may share one (Tag)
	imageLabels map[string]map[string]string // reference → its image's labels (SetImageLabels, Commit)
	missing     map[sandbox.OCIRuntime]bool  // runtimes CheckRuntime refuses (Lack)
	fail        map[string]error             // method name → error returned once set
	logs        map[string][]sandbox.LogLine // container ID → its log (WriteLog)
	events      bool                         // send events (ReportEvents)
	watches     map[*watch]struct{}          // open WatchContainers subscriptions
	nextID      int
	nextImage   int
	nextPort    int
	calls       []string
}

// The fake has every capability the manager looks for (see
// sandbox.Runtime), so that tests reach every path; it has no Pinger, the
// server's health check of a real engine.
var (
	_ sandbox.Runtime        = (*Runtime)(nil)
	_ sandbox.Freezer        = (*Runtime)(nil)
	_ sandbox.Committer      = (*Runtime)(nil)
	_ sandbox.StatsReader    = (*Runtime)(nil)
	_ sandbox.LogReader      = (*Runtime)(nil)
	_ sandbox.Checkpointer   = (*Runtime)(nil)
	_ sandbox.RuntimeChecker = (*Runtime)(nil)
	_ sandbox.EventWatcher   = (*Runtime)(nil)
)

// New returns an empty runtime holding the given images.
func New(images ...string) *Runtime {
	r := &Runtime{
		containers:  map[string]*sandbox.Container{},
		limits:      map[string]Limits{},
		agentArgs:   map[string][]string{},
		runtimes:    map[string]sandbox.OCIRuntime{},
		mounts:      map[string][]sandbox.Mount{},
		checkpoints: map[string]string{},
		images:      map[string]string{},
		imageLabels: map[string]map[string]string{},
		missing:     map[sandbox.OCIRuntime]bool{},
		fail:        map[string]error{},
		watches:     map[*watch]struct{}{},
		nextPort:    40000,
	}
	for _, im := range images {
		r.images[im] = r.newImageID()
	}
	return r
}

// Limits are a container's resource limits as last set by Create or
// Update.
type Limits struct {
	CPUCount, MemoryMB, PidsLimit int
}

// newImageID returns a fresh image ID, hex digits as random as the
// engine's, so that ID prefixes tell images apart. The caller holds r.mu
// or owns r.
func (r *Runtime) newImageID() string {
	r.nextImage++
	return fmt.Sprintf("sha256:%x", sha256.Sum256(fmt.Appendf(nil, "image %d", r.nextImage)))
}

// find returns the reference under which the image ref names is kept,
// resolving ref as the Docker engine does: a reference as given, then in
// its normalised form ("python:3.12" is "docker.io/library/python:3.12"),
// then as an image ID, whole or any unambiguous prefix of its hex digits,
// with or without "sha256:". The caller holds r.mu.
func (r *Runtime) find(ref string) (string, bool) {
	if _, ok := r.images[ref]; ok {
		return ref, true
	}
	if n, err := reference.ParseDockerRef(ref); err == nil {
		for _, k := range slices.Sorted(maps.Keys(r.images)) {
			if kn, err := reference.ParseDockerRef(k); err == nil && kn.String() == n.String() {
				return k, true
			}
		}
	}
	prefix := strings.TrimPrefix(ref, "sha256:")
	if prefix == "" || strings.Trim(prefix, "0123456789abcdef") != "" {
		return "", false
	}
	var key, id string
	for _, k := range slices.Sorted(maps.Keys(r.images)) {
		if v := r.images[k]; strings.HasPrefix(strings.TrimPrefix(v, "sha256:"), prefix) {
			if id != "" && v != id {
				return "", false // ambiguous, as the engine says
			}
			if id == "" {
				key, id = k, v
			}
		}
	}
	return key, id != ""
}

// Tag gives the image src names the reference ref as well, as `docker
// tag` does.
func (r *Runtime) Tag(src, ref string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.find(src); ok {
		r.images[ref] = r.images[k]
		r.imageLabels[ref] = maps.Clone(r.imageLabels[k])
	}
}

// ImageIDOf returns the ID of the image ref names, found as the engine
// finds it.
func (r *Runtime) ImageIDOf(ref string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.find(ref)
	return r.images[k], ok
}

// Rebuild gives ref a new image ID, as rebuilding an image under the
// same name does; containers keep running the old one.
func (r *Runtime) Rebuild(ref string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.images[ref] = r.newImageID()
}

// LimitsOf returns a container's resource limits.
func (r *Runtime) LimitsOf(id string) (Limits, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.limits[id]
	return l, ok
}

// AgentArgsOf returns the agent arguments a container was created with.
func (r *Runtime) AgentArgsOf(id string) ([]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	args, ok := r.agentArgs[id]
	return slices.Clone(args), ok
}

// MountsOf returns the mounts a container was created with.
func (r *Runtime) MountsOf(id string) []sandbox.Mount {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.mounts[id])
}

// Fail makes every later call of method (e.g. "Create", "Stats") return
// err; a nil err clears the failure.
func (r *Runtime) Fail(method string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.fail, method)
		return
	}
	r.fail[method] = err
}

// Calls returns the methods called so far, in order, with their argument
// (container ID or image), as "Method arg".
func (r *Runtime) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Containers returns a copy of every container, sorted by ID.
func (r *Runtime) Containers() []sandbox.Container {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]sandbox.Container, 0, len(r.containers))
	for _, id := range slices.Sorted(maps.Keys(r.containers)) {
		out = append(out, clone(r.containers[id]))
	}
	return out
}

// Images returns the images present, sorted.
func (r *Runtime) Images() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.images))
}

// Put adds or replaces a container, as if something outside Warren had
// changed the engine (a dockerd restart, a stray container).
func (r *Runtime) Put(c sandbox.Container) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c2 := clone(&c)
	r.containers[c.ID] = &c2
}

// StopAll stops every container, as a dockerd restart does.
func (r *Runtime) StopAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.containers {
		c.Running, c.Paused, c.AgentAddr = false, false, ""
	}
}

func clone(c *sandbox.Container) sandbox.Container {
	out := *c
	out.Labels = maps.Clone(c.Labels)
	return out
}

// begin records a call and returns its scripted failure, if any.
// The caller holds r.mu.
func (r *Runtime) begin(method, arg string) error {
	r.calls = append(r.calls, method+" "+arg)
	return r.fail[method]
}

func notFound(id string) error {
	return sandbox.Errorf(sandbox.KindNotFound, "container %s not found", id)
}

func (r *Runtime) addr() string {
	r.nextPort++
	return fmt.Sprintf("127.0.0.1:%d", r.nextPort)
}

// Create adds a running container for spec; the image must be present.
func (r *Runtime) Create(ctx context.Context, spec sandbox.ContainerSpec) (sandbox.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("Create", spec.SandboxID); err != nil {
		return sandbox.Container{}, err
	}
	key, ok := r.find(spec.Image)
	if !ok {
		return sandbox.Container{}, sandbox.Errorf(sandbox.KindNotFound, "image %s not found", spec.Image)
	}
	imageID := r.images[key]
	r.nextID++
	labels := spec.EngineLabels(sandbox.DefaultInstance)
	c := &sandbox.Container{
		ID:          fmt.Sprintf("c%04d", r.nextID),
		SandboxID:   spec.SandboxID,
		Labels:      labels,
		Running:     true,
		AgentAddr:   r.addr(),
		ImageID:     imageID,
		AgentSecret: spec.AgentSecret,
	}
	r.containers[c.ID] = c
	r.limits[c.ID] = Limits{spec.CPUCount, spec.MemoryMB, spec.PidsLimit}
	r.agentArgs[c.ID] = slices.Clone(spec.AgentArgs)
	r.runtimes[c.ID] = spec.Runtime
	r.mounts[c.ID] = slices.Clone(spec.Mounts)
	return clone(c), nil
}

// Start starts a stopped container on a new agent address.
func (r *Runtime) Start(ctx context.Context, id string) (sandbox.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("Start", id); err != nil {
		return sandbox.Container{}, err
	}
	c, ok := r.containers[id]
	if !ok {
		return sandbox.Container{}, notFound(id)
	}
	if !c.Running {
		c.Running, c.AgentAddr = true, r.addr()
	}
	return clone(c), nil
}

// Stop stops a container, frozen or not.
func (r *Runtime) Stop(ctx context.Context, id string) error {
	return r.update("Stop", id, func(c *sandbox.Container) {
		if c.Running {
			r.emitLocked(id, sandbox.ContainerDied)
		}
		c.Running, c.Paused, c.AgentAddr = false, false, ""
	})
}

// Update sets a container's limits; zero ones are left as they are.
func (r *Runtime) Update(ctx context.Context, id string, cpuCount, memoryMB, pidsLimit int) error {
	return r.update("Update", id, func(c *sandbox.Container) {
		l := r.limits[id]
		if cpuCount != 0 {
			l.CPUCount = cpuCount
		}
		if memoryMB != 0 {
			l.MemoryMB = memoryMB
		}
		if pidsLimit != 0 {
			l.PidsLimit = pidsLimit
		}
		r.limits[id] = l
	})
}

// Freeze pauses a running container.
func (r *Runtime) Freeze(ctx context.Context, id string) error {
	return r.update("Freeze", id, func(c *sandbox.Container) {
		c.Paused = true
		r.emitLocked(id, sandbox.ContainerPaused)
	})
}

// Thaw unpauses a frozen container.
func (r *Runtime) Thaw(ctx context.Context, id string) error {
	return r.update("Thaw", id, func(c *sandbox.Container) {
		c.Paused = false
		r.emitLocked(id, sandbox.ContainerUnpaused)
	})
}

func (r *Runtime) update(method, id string, f func(*sandbox.Container)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin(method, id); err != nil {
		return err
	}
	c, ok := r.containers[id]
	if !ok {
		return notFound(id)
	}
	f(c)
	return nil
}

// Remove deletes a container in any state.
func (r *Runtime) Remove(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("Remove", id); err != nil {
		return err
	}
	if _, ok := r.containers[id]; !ok {
		return notFound(id)
	}
	r.removeLocked(id)
	return nil
}

// Inspect returns a container.
func (r *Runtime) Inspect(ctx context.Context, id string) (sandbox.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("Inspect", id); err != nil {
		return sandbox.Container{}, err
	}
	c, ok := r.containers[id]
	if !ok {
		return sandbox.Container{}, notFound(id)
	}
	return clone(c), nil
}

// List returns every container labelled as Warren's, sorted by ID.
func (r *Runtime) List(ctx context.Context) ([]sandbox.Container, error) {
	r.mu.Lock()
	if err := r.begin("List", ""); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	r.mu.Unlock()
	var out []sandbox.Container
	for _, c := range r.Containers() {
		if c.Labels[sandbox.LabelManaged] == sandbox.DefaultInstance {
			out = append(out, c)
		}
	}
	return out, nil
}

// Stats returns a fixed sample stamped with the current time.
func (r *Runtime) Stats(ctx context.Context, id string) (sandbox.Stats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("Stats", id); err != nil {
		return sandbox.Stats{}, err
	}
	c, ok := r.containers[id]
	if !ok {
		return sandbox.Stats{}, notFound(id)
	}
	if !c.Running {
		return sandbox.Stats{}, sandbox.Errorf(sandbox.KindConflict, "container %s is not running", id)
	}
	return sandbox.Stats{
		Time: time.Now(), CPUCount: 2, CPUUsedPct: 12.5,
		MemUsed: 64 << 20, MemTotal: 512 << 20, MemCache: 8 << 20,
		DiskUsed: 100 << 20, DiskTotal: 10 << 30,
	}, nil
}

// Commit adds ref to the images, labelled as the engine labels a commit:
// with the container's labels, Warren's managed, sandbox and pool ones
// emptied (as runtime/docker's Commit does).
func (r *Runtime) Commit(ctx context.Context, id, ref string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("Commit", id); err != nil {
		return "", err
	}
	c, ok := r.containers[id]
	if !ok {
		return "", notFound(id)
	}
	r.images[ref] = r.newImageID()
	labels := maps.Clone(c.Labels)
	for _, l := range []string{sandbox.LabelManaged, sandbox.LabelSandbox, sandbox.LabelPool} {
		if _, ok := labels[l]; ok {
			labels[l] = ""
		}
	}
	r.imageLabels[ref] = labels
	return ref, nil
}

// RemoveImage deletes an image.
func (r *Runtime) RemoveImage(ctx context.Context, ref string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("RemoveImage", ref); err != nil {
		return err
	}
	k, ok := r.find(ref)
	if !ok {
		return sandbox.Errorf(sandbox.KindNotFound, "image %s not found", ref)
	}
	delete(r.images, k)
	delete(r.imageLabels, k)
	return nil
}

// ImageExists reports whether the engine finds an image for ref.
func (r *Runtime) ImageExists(ctx context.Context, ref string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("ImageExists", ref); err != nil {
		return false, err
	}
	_, ok := r.find(ref)
	return ok, nil
}

// InspectImage returns the image the engine finds for ref, with every
// reference that names it.
func (r *Runtime) InspectImage(ctx context.Context, ref string) (sandbox.Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("InspectImage", ref); err != nil {
		return sandbox.Image{}, err
	}
	k, ok := r.find(ref)
	if !ok {
		return sandbox.Image{}, sandbox.Errorf(sandbox.KindNotFound, "image %s not found", ref)
	}
	img := sandbox.Image{ID: r.images[k], Labels: maps.Clone(r.imageLabels[k])}
	for _, other := range slices.Sorted(maps.Keys(r.images)) {
		if r.images[other] != img.ID {
			continue
		}
		if strings.Contains(other, "@") {
			img.RepoDigests = append(img.RepoDigests, other)
		} else {
			img.RepoTags = append(img.RepoTags, other)
		}
	}
	return img, nil
}

// SetImageLabels gives the image ref labels.
func (r *Runtime) SetImageLabels(ref string, labels map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.find(ref); ok {
		ref = k
	}
	r.imageLabels[ref] = maps.Clone(labels)
}

// ImageLabels returns the labels SetImageLabels gave ref.
func (r *Runtime) ImageLabels(ctx context.Context, ref string) (map[string]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("ImageLabels", ref); err != nil {
		return nil, err
	}
	k, ok := r.find(ref)
	if !ok {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "image %s not found", ref)
	}
	return maps.Clone(r.imageLabels[k]), nil
}

// Lack makes CheckRuntime refuse rt, as an engine without it would.
func (r *Runtime) Lack(rt sandbox.OCIRuntime) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.missing[rt] = true
}

// CheckRuntime refuses the runtimes given to Lack.
func (r *Runtime) CheckRuntime(ctx context.Context, rt sandbox.OCIRuntime) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.missing[rt] {
		return fmt.Errorf("the engine has no runtime %s", rt)
	}
	return nil
}

// ImageID returns ref's current image ID.
func (r *Runtime) ImageID(ctx context.Context, ref string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin("ImageID", ref); err != nil {
		return "", err
	}
	k, ok := r.find(ref)
	if !ok {
		return "", sandbox.Errorf(sandbox.KindNotFound, "image %s not found", ref)
	}
	return r.images[k], nil
}
