// Package template is Warren's template registry and builder: it keeps
// templates (names, tags, resource defaults, start and ready commands),
// their builds and build logs, accepts the build context uploads of E2B's
// SDK, and turns the SDK's build steps into images on an Engine (the Docker
// engine's builder: runtime/docker), one layer per step so that unchanged
// steps come from the engine's cache.
//
// It owns no HTTP (internal/api serves the wire format) and does not run
// sandboxes: the lifecycle manager asks Resolve for a template's image and
// settings, and runs its start and ready commands itself. Persistence goes
// through the Store interface, implemented by internal/store/sqlite.
package template

import (
	"context"
	"io"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Engine is what the registry needs from a container engine to build
// templates: runtime/docker's Builder, or a fake in tests.
type Engine interface {
	// Build builds the Dockerfile in the context tar and tags the result;
	// each line of the engine's output goes to out as it comes. A failed
	// step returns a *sandbox.BuildFailure.
	Build(ctx context.Context, contextTar io.Reader, tag string, noCache bool, out func(line string)) error
	// InspectImage returns the image the engine finds for ref, by name or
	// by ID (see sandbox.Images). KindNotFound when it has none.
	InspectImage(ctx context.Context, ref string) (sandbox.Image, error)
	// ImageEnv returns an image's environment as KEY=value strings.
	ImageEnv(ctx context.Context, ref string) ([]string, error)
	// RemoveImage removes an image reference and the step layers no other
	// image builds on; one already gone is no error.
	RemoveImage(ctx context.Context, ref string) error
	// RemoveLayer removes an untagged image by ID (a build step's layer),
	// with its untagged parents no other image uses. A tagged image, or
	// one already gone, is left alone; one that other images build on is
	// a KindConflict error.
	RemoveLayer(ctx context.Context, id string) error
}

// Status is where a build is.
type Status string

const (
	StatusWaiting  Status = "waiting"  // requested, or queued behind other builds
	StatusBuilding Status = "building" // running on the engine
	StatusReady    Status = "ready"
	StatusError    Status = "error"
)

// Done reports whether the build has finished, well or not.
func (s Status) Done() bool { return s == StatusReady || s == StatusError }

// DefaultTag is the tag a build gets when the client names none, and the
// one a bare template name resolves to.
const DefaultTag = "default"

// Template is a named, buildable sandbox environment.
type Template struct {
	ID     string
	TeamID string
	// Names are the template's aliases, unique across Warren.
	Names  []string
	Public bool
	// CPUCount and MemoryMB are defaults for its sandboxes; 0 = the
	// server's defaults.
	CPUCount  int
	MemoryMB  int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Build is one build of a template. What a sandbox of the template runs
// (image, commands, user, workdir, env) belongs to the build, because
// tags point at builds.
type Build struct {
	ID         string
	TemplateID string
	TeamID     string
	Status     Status
	// Reason says why a build failed; nil unless Status is StatusError.
	Reason *Reason
	// Tags are assigned to the build when it succeeds.
	Tags []string

	CPUCount int
	MemoryMB int

	Spec BuildSpec // what the client asked to build; zero until started

	// Filled in when the build succeeds.
	Image    string // the image reference sandboxes run
	User     string // default user in the sandbox ("" = the server's)
	Workdir  string // default workdir ("" = the user's home)
	Env      map[string]string
	StartCmd string
	ReadyCmd string
	// AgentArgs are the agent arguments its sandboxes run with, from the
	// template it was built on (the code interpreter's); nil = none.
	AgentArgs []string

	// CacheLayer is a failed build's last layer of its own steps: the
	// engine keeps it as the cache of the template's next build, and the
	// registry removes it once that build is done or the template goes.
	CacheLayer string

	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt time.Time // zero until done
}

// Reason explains a failed build.
type Reason struct {
	Message string
	Step    string // "base", a step number from 1, or "finalize"; "" = none
}

// BuildSpec is E2B's TemplateBuildStartV2 as Warren keeps it.
type BuildSpec struct {
	FromImage    string `json:"fromImage,omitempty"`
	FromTemplate string `json:"fromTemplate,omitempty"`
	Force        bool   `json:"force,omitempty"`
	Steps        []Step `json:"steps,omitempty"`
	StartCmd     string `json:"startCmd,omitempty"`
	ReadyCmd     string `json:"readyCmd,omitempty"`
}

// Step is one build step as the SDK sends it.
type Step struct {
	Type      StepType `json:"type"`
	Args      []string `json:"args,omitempty"`
	FilesHash string   `json:"filesHash,omitempty"`
	Force     bool     `json:"force,omitempty"`
}

// LogEntry is one line of a build's log.
type LogEntry struct {
	Time    time.Time
	Level   string // debug, info, warn, error
	Message string
	Step    string // as in Reason.Step; "" = not tied to a step
}

// Tag points a name at one build of a template.
type Tag struct {
	Tag       string
	BuildID   string
	CreatedAt time.Time
}

// Source is a template the registry does not build but builds may start
// from: a built-in one.
type Source struct {
	Image     string
	AgentArgs []string // the agent arguments of its sandboxes; nil = none
}

// SnapshotFinder is the part of the sandbox store that finds snapshots.
type SnapshotFinder interface {
	GetSnapshot(ctx context.Context, id string) (sandbox.Snapshot, error)
	// ListSnapshots returns a team's snapshots; sandboxID, when not "",
	// keeps those taken from that sandbox.
	ListSnapshots(ctx context.Context, teamID, sandboxID string) ([]sandbox.Snapshot, error)
}

// Store keeps templates, builds, tags and build logs. Missing records are
// *sandbox.Error of KindNotFound.
type Store interface {
	// PutTemplate inserts or replaces a template with its names; a name
	// another template holds is KindConflict.
	PutTemplate(ctx context.Context, t Template) error
	GetTemplate(ctx context.Context, id string) (Template, error)
	TemplateByName(ctx context.Context, name string) (Template, error)
	// ListTemplates returns a team's templates (all when teamID is ""),
	// oldest first.
	ListTemplates(ctx context.Context, teamID string) ([]Template, error)
	// DeleteTemplate removes a template with its names, builds, tags and
	// logs.
	DeleteTemplate(ctx context.Context, id string) error

	PutBuild(ctx context.Context, b Build) error
	GetBuild(ctx context.Context, id string) (Build, error)
	// ListBuilds returns a template's builds, oldest first.
	ListBuilds(ctx context.Context, templateID string) ([]Build, error)
	// ActiveBuilds returns every build waiting or building.
	ActiveBuilds(ctx context.Context) ([]Build, error)

	AppendBuildLog(ctx context.Context, buildID string, e LogEntry) error
	// BuildLogs returns a build's entries from offset (0 = first), at most
	// limit (0 = all).
	BuildLogs(ctx context.Context, buildID string, offset, limit int) ([]LogEntry, error)

	// SetTag points tag at buildID, replacing what it pointed at.
	SetTag(ctx context.Context, templateID string, t Tag) error
	DeleteTag(ctx context.Context, templateID, tag string) error
	Tags(ctx context.Context, templateID string) ([]Tag, error)
}
