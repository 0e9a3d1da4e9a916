package template

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Config configures a Registry. Zero values take the documented default.
type Config struct {
	Store  Store  // required
	Engine Engine // required
	// Dir keeps uploaded build contexts (template-files/) and the
	// contexts of running builds (template-builds/); required.
	Dir    string
	Logger *slog.Logger // nil = discard

	// BaseImage is the image of the "base" template, and what E2B's
	// default base image (e2bdev/base) means here; default sandbox.BaseImage.
	BaseImage string
	// Builtins are the templates the server has without a build, by name
	// (the lifecycle package owns them and serves them ahead of the
	// registry): their names exist for everyone and cannot be built, and
	// builds may start from them (fromTemplate). nil = none.
	Builtins map[string]Source
	// Snapshots finds a team's snapshots, which builds may start from as
	// well; nil = none.
	Snapshots SnapshotFinder
	// MaxConcurrentBuilds builds run at once; more wait in a queue.
	// Default DefaultMaxConcurrentBuilds.
	MaxConcurrentBuilds int
	// MaxUploadBytes bounds one build context upload; default 1 GiB.
	MaxUploadBytes int64
}

// DefaultMaxConcurrentBuilds is Config.MaxConcurrentBuilds' default.
const DefaultMaxConcurrentBuilds = 2

// Registry keeps templates and runs their builds. Create it with New,
// call Start, and Close when done; Close cancels running builds.
type Registry struct {
	cfg     Config
	store   Store
	log     *slog.Logger
	uploads *uploads
	sem     chan struct{} // one token per running build

	ctx    context.Context // parent of every build; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex // guards running and releasers
	running map[string]*runningBuild
	// releasers are called before an image is removed, to let go of what
	// holds it (the warm pool's containers).
	releasers []func(ctx context.Context, image string)
}

type runningBuild struct {
	templateID string
	cancel     context.CancelFunc
	done       chan struct{}
}

// BeforeRemoveImage registers f to be called before the registry removes
// a template's image (a superseded build, a deleted template), so that
// what keeps the image in use, such as the warm pool's containers of it,
// can let go first.
func (r *Registry) BeforeRemoveImage(f func(ctx context.Context, image string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releasers = append(r.releasers, f)
}

// removeImage removes a template's image after its releasers let go of it.
func (r *Registry) removeImage(ctx context.Context, image string) error {
	r.mu.Lock()
	releasers := slices.Clone(r.releasers)
	r.mu.Unlock()
	for _, f := range releasers {
		f(ctx, image)
	}
	return r.cfg.Engine.RemoveImage(ctx, image)
}

// New returns a Registry; builds run only after Start.
func New(cfg Config) (*Registry, error) {
	if cfg.Store == nil || cfg.Engine == nil || cfg.Dir == "" {
		return nil, errors.New("template: Store, Engine and Dir are required")
	}
	if cfg.BaseImage == "" {
		cfg.BaseImage = sandbox.BaseImage
	}
	if cfg.MaxConcurrentBuilds <= 0 {
		cfg.MaxConcurrentBuilds = DefaultMaxConcurrentBuilds
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = 1 << 30
	}
	up, err := newUploads(filepath.Join(cfg.Dir, "template-files"), cfg.MaxUploadBytes)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Registry{
		cfg: cfg, store: cfg.Store, log: logkey.For(cfg.Logger, "template"), uploads: up,
		sem: make(chan struct{}, cfg.MaxConcurrentBuilds),
		ctx: ctx, cancel: cancel, running: map[string]*runningBuild{},
	}, nil
}

// Start marks the builds a previous run of the server left waiting in the
// queue or building as failed, and clears their leftover contexts.
func (r *Registry) Start(ctx context.Context) error {
	active, err := r.store.ActiveBuilds(ctx)
	if err != nil {
		return fmt.Errorf("load builds: %w", err)
	}
	for _, b := range active {
		if b.Status == StatusWaiting && !b.started() {
			continue // requested, never started: the client may still start it
		}
		r.finish(ctx, &b, &Reason{Message: "interrupted by a server restart"})
		r.log.Warn("build interrupted by a restart", logkey.Template, b.TemplateID, logkey.Build, b.ID)
	}
	os.RemoveAll(filepath.Join(r.cfg.Dir, "template-builds"))
	templates, err := r.store.ListTemplates(ctx, "")
	if err != nil {
		return fmt.Errorf("load templates: %w", err)
	}
	for _, t := range templates {
		r.prune(ctx, t.ID, "")
	}
	return nil
}

// prune removes the images of a template's builds that no tag points at
// any more (superseded by a newer build, or untagged) and the cache layers
// failed builds left. An image a container still uses stays, for a later
// prune (after the next build, or at start). While another of the
// template's builds runs, nothing is removed: it may be building on them.
func (r *Registry) prune(ctx context.Context, templateID, self string) {
	if r.othersRunning(templateID, self) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	builds, err := r.store.ListBuilds(ctx, templateID)
	if err != nil {
		r.log.Warn("cannot list builds to prune", logkey.Template, templateID, "err", err)
		return
	}
	tags, err := r.store.Tags(ctx, templateID)
	if err != nil {
		r.log.Warn("cannot list tags to prune", logkey.Template, templateID, "err", err)
		return
	}
	for _, b := range builds {
		changed := false
		if b.Image != "" && !slices.ContainsFunc(tags, func(t Tag) bool { return t.BuildID == b.ID }) {
			if err := r.removeImage(ctx, b.Image); err != nil {
				r.log.Info("superseded build image kept", logkey.Build, b.ID, logkey.Image, b.Image, "err", err)
			} else {
				b.Image, changed = "", true
			}
		}
		if b.CacheLayer != "" {
			// A layer a newer image builds on goes with that image.
			if err := r.cfg.Engine.RemoveLayer(ctx, b.CacheLayer); err == nil || sandbox.KindOf(err) == sandbox.KindConflict {
				b.CacheLayer, changed = "", true
			} else {
				r.log.Info("failed build's cache layer kept", logkey.Build, b.ID, "layer", b.CacheLayer, "err", err)
			}
		}
		if changed {
			if err := r.store.PutBuild(ctx, b); err != nil {
				r.log.Warn("cannot save pruned build", logkey.Build, b.ID, "err", err)
			}
		}
	}
}

// othersRunning reports whether a build of the template other than self
// is waiting or running.
func (r *Registry) othersRunning(templateID, self string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, rb := range r.running {
		if rb.templateID == templateID && id != self {
			return true
		}
	}
	return false
}

// Close cancels running builds and waits for them.
func (r *Registry) Close() error {
	r.cancel()
	r.wg.Wait()
	return nil
}

// BuildRequest asks for a new build of a template, created when its name
// is new.
type BuildRequest struct {
	Name     string // "name" or "name:tag"
	Tags     []string
	CPUCount int // 0 = keep the template's
	MemoryMB int // 0 = keep the template's
}

// RequestBuild registers a build, waiting for StartBuild, of the template
// named in req, creating the template when the name is new.
func (r *Registry) RequestBuild(ctx context.Context, team string, req BuildRequest) (Template, Build, error) {
	if req.Name == "" {
		return Template{}, Build{}, sandbox.Errorf(sandbox.KindInvalid, "a template name is required")
	}
	name, tag, err := ParseRef(req.Name)
	if err != nil {
		return Template{}, Build{}, err
	}
	if _, ok := r.cfg.Builtins[name]; ok {
		return Template{}, Build{}, sandbox.Errorf(sandbox.KindInvalid, "the template name '%s' is reserved", name)
	}
	if err := checkTags(req.Tags); err != nil {
		return Template{}, Build{}, err
	}
	if req.CPUCount < 0 {
		return Template{}, Build{}, sandbox.Errorf(sandbox.KindInvalid, "cpuCount must be at least 1")
	}
	if req.MemoryMB < 0 || (req.MemoryMB > 0 && req.MemoryMB < 128) {
		return Template{}, Build{}, sandbox.Errorf(sandbox.KindInvalid, "memoryMB must be at least 128")
	}
	now := time.Now().UTC()
	t, err := r.store.TemplateByName(ctx, name)
	switch {
	case err == nil && t.TeamID != team:
		return Template{}, Build{}, sandbox.Errorf(sandbox.KindConflict, "the template name '%s' is taken by another team", name)
	case sandbox.KindOf(err) == sandbox.KindNotFound:
		t = Template{ID: NewTemplateID(), TeamID: team, Names: []string{name}, CreatedAt: now}
	case err != nil:
		return Template{}, Build{}, err
	}
	if req.CPUCount > 0 {
		t.CPUCount = req.CPUCount
	}
	if req.MemoryMB > 0 {
		t.MemoryMB = req.MemoryMB
	}
	t.UpdatedAt = now
	if err := r.store.PutTemplate(ctx, t); err != nil {
		return Template{}, Build{}, err
	}
	tags := []string{tag}
	for _, tg := range req.Tags {
		if !slices.Contains(tags, tg) {
			tags = append(tags, tg)
		}
	}
	b := Build{
		ID: NewBuildID(), TemplateID: t.ID, TeamID: team, Status: StatusWaiting, Tags: tags,
		CPUCount: t.CPUCount, MemoryMB: t.MemoryMB, CreatedAt: now, UpdatedAt: now,
	}
	if err := r.store.PutBuild(ctx, b); err != nil {
		return Template{}, Build{}, err
	}
	r.log.Info("build requested", logkey.Template, t.ID, logkey.Build, b.ID, "name", name)
	return t, b, nil
}

// Template returns one of team's templates by ID or name.
func (r *Registry) Template(ctx context.Context, team, idOrName string) (Template, error) {
	t, err := r.lookup(ctx, idOrName)
	if err != nil {
		return Template{}, err
	}
	if t.TeamID != team {
		return Template{}, notFound(idOrName)
	}
	return t, nil
}

// lookup finds a template by ID, then by name.
func (r *Registry) lookup(ctx context.Context, idOrName string) (Template, error) {
	t, err := r.store.GetTemplate(ctx, idOrName)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		t, err = r.store.TemplateByName(ctx, idOrName)
	}
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return Template{}, notFound(idOrName)
	}
	return t, err
}

func notFound(ref string) error {
	return sandbox.Errorf(sandbox.KindNotFound, "template '%s' not found", ref)
}

// FileUpload says whether team's files with hash are already stored, and
// returns a token for uploading them with Upload (again, when they are).
func (r *Registry) FileUpload(ctx context.Context, team, templateID, hash string) (present bool, token string, err error) {
	if _, err := r.Template(ctx, team, templateID); err != nil {
		return false, "", err
	}
	if err := checkHash(hash); err != nil {
		return false, "", err
	}
	// A ticket even when present, as E2B gives: the SDK's forceUpload
	// uploads the files again, replacing them.
	return r.uploads.present(team, hash), r.uploads.issue(team, hash), nil
}

// Upload stores the body of an upload for a token FileUpload issued.
// size is the declared length (-1 when unknown, which is refused).
func (r *Registry) Upload(token string, size int64, body io.Reader) error {
	return r.uploads.receive(token, size, body)
}

// Build returns one of team's builds with its template.
func (r *Registry) Build(ctx context.Context, team, templateID, buildID string) (Template, Build, error) {
	t, err := r.Template(ctx, team, templateID)
	if err != nil {
		return Template{}, Build{}, err
	}
	b, err := r.store.GetBuild(ctx, buildID)
	if err != nil || b.TemplateID != t.ID {
		return Template{}, Build{}, sandbox.Errorf(sandbox.KindNotFound, "build '%s' of template '%s' not found", buildID, templateID)
	}
	return t, b, nil
}

// Builds returns a template's builds, oldest first.
func (r *Registry) Builds(ctx context.Context, templateID string) ([]Build, error) {
	return r.store.ListBuilds(ctx, templateID)
}

// Templates returns team's templates, oldest first.
func (r *Registry) Templates(ctx context.Context, team string) ([]Template, error) {
	return r.store.ListTemplates(ctx, team)
}

// Alias returns the template holding name. A template of another team is
// KindForbidden unless public: it exists, but is not the caller's.
func (r *Registry) Alias(ctx context.Context, team, name string) (Template, error) {
	if _, ok := r.cfg.Builtins[name]; ok {
		return Template{ID: name, Names: []string{name}, Public: true}, nil
	}
	t, err := r.store.TemplateByName(ctx, name)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return Template{}, notFound(name)
	}
	if err != nil {
		return Template{}, err
	}
	if t.TeamID != team && !t.Public {
		return Template{}, sandbox.Errorf(sandbox.KindForbidden, "template '%s' belongs to another team", name)
	}
	return t, nil
}

// Update sets whether a template is public.
func (r *Registry) Update(ctx context.Context, team, idOrName string, public *bool) (Template, error) {
	t, err := r.Template(ctx, team, idOrName)
	if err != nil {
		return Template{}, err
	}
	if public != nil {
		t.Public = *public
		t.UpdatedAt = time.Now().UTC()
		if err := r.store.PutTemplate(ctx, t); err != nil {
			return Template{}, err
		}
	}
	return t, nil
}

// Delete removes a template: it cancels its running builds and waits for
// them, then removes its records and, as far as no sandbox still uses
// them, its images.
func (r *Registry) Delete(ctx context.Context, team, idOrName string) error {
	t, err := r.Template(ctx, team, idOrName)
	if err != nil {
		return err
	}
	var waits []chan struct{}
	r.mu.Lock()
	for _, rb := range r.running {
		if rb.templateID == t.ID {
			rb.cancel()
			waits = append(waits, rb.done)
		}
	}
	r.mu.Unlock()
	for _, done := range waits {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	builds, err := r.store.ListBuilds(ctx, t.ID)
	if err != nil {
		return err
	}
	if err := r.store.DeleteTemplate(ctx, t.ID); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	for _, b := range builds {
		if b.Image == "" {
			continue
		}
		if err := r.removeImage(ctx, b.Image); err != nil {
			r.log.Info("template image kept", logkey.Template, t.ID, logkey.Image, b.Image, "err", err)
		}
	}
	// After the images, which take the cache layers they build on.
	for _, b := range builds {
		if b.CacheLayer == "" {
			continue
		}
		if err := r.cfg.Engine.RemoveLayer(ctx, b.CacheLayer); err != nil {
			r.log.Info("failed build's cache layer kept", logkey.Template, t.ID, "layer", b.CacheLayer, "err", err)
		}
	}
	r.log.Info("template deleted", logkey.Template, t.ID)
	return nil
}
