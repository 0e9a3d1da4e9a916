package template

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// checkLevel validates a minimum log level; "" means all.
func checkLevel(level string) error {
	if _, ok := sandbox.LogLevelRank(level); level != "" && !ok {
		return sandbox.Errorf(sandbox.KindInvalid, "invalid level '%s': use debug, info, warn or error", level)
	}
	return nil
}

func atLeast(e LogEntry, level string) bool {
	have, _ := sandbox.LogLevelRank(e.Level)
	want, _ := sandbox.LogLevelRank(level)
	return have >= want
}

// Status returns a build and its log entries from offset, at most limit,
// of level and above.
func (r *Registry) Status(ctx context.Context, team, templateID, buildID string, offset, limit int, level string) (Build, []LogEntry, error) {
	if err := checkLevel(level); err != nil {
		return Build{}, nil, err
	}
	_, b, err := r.Build(ctx, team, templateID, buildID)
	if err != nil {
		return Build{}, nil, err
	}
	if level == "" {
		entries, err := r.store.BuildLogs(ctx, buildID, offset, limit)
		return b, entries, err
	}
	all, err := r.store.BuildLogs(ctx, buildID, 0, 0)
	if err != nil {
		return Build{}, nil, err
	}
	all = slices.DeleteFunc(all, func(e LogEntry) bool { return !atLeast(e, level) })
	return b, page(all, offset, limit), nil
}

// LogQuery selects build log entries for Logs.
type LogQuery struct {
	Cursor   time.Time // entries at or after it (before it, backward); zero = all
	Limit    int
	Backward bool
	Level    string
}

// Logs returns a build's log entries by time.
func (r *Registry) Logs(ctx context.Context, team, templateID, buildID string, q LogQuery) ([]LogEntry, error) {
	if err := checkLevel(q.Level); err != nil {
		return nil, err
	}
	if _, _, err := r.Build(ctx, team, templateID, buildID); err != nil {
		return nil, err
	}
	all, err := r.store.BuildLogs(ctx, buildID, 0, 0)
	if err != nil {
		return nil, err
	}
	all = slices.DeleteFunc(all, func(e LogEntry) bool {
		if !atLeast(e, q.Level) {
			return true
		}
		if q.Cursor.IsZero() {
			return false
		}
		if q.Backward {
			return e.Time.After(q.Cursor)
		}
		return e.Time.Before(q.Cursor)
	})
	if q.Backward {
		slices.Reverse(all)
	}
	return page(all, 0, q.Limit), nil
}

func page[T any](s []T, offset, limit int) []T {
	if offset >= len(s) {
		return nil
	}
	s = s[max(offset, 0):]
	if limit > 0 && len(s) > limit {
		s = s[:limit]
	}
	return s
}

// AssignTags points tags at the build target ("name:tag", or "name" for
// its default tag) points at, and returns that build's ID.
func (r *Registry) AssignTags(ctx context.Context, team, target string, tags []string) (string, error) {
	name, tag, err := ParseRef(target)
	if err != nil {
		return "", err
	}
	if len(tags) == 0 {
		return "", sandbox.Errorf(sandbox.KindInvalid, "no tags given")
	}
	if err := checkTags(tags); err != nil {
		return "", err
	}
	t, err := r.Template(ctx, team, name)
	if err != nil {
		return "", err
	}
	buildID, err := r.tagged(ctx, t, tag)
	if err != nil {
		return "", err
	}
	now := time.Now().UTC()
	for _, tg := range tags {
		if err := r.store.SetTag(ctx, t.ID, Tag{Tag: tg, BuildID: buildID, CreatedAt: now}); err != nil {
			return "", err
		}
	}
	r.prune(ctx, t.ID, "")
	return buildID, nil
}

// RemoveTags removes tags from the template called name.
func (r *Registry) RemoveTags(ctx context.Context, team, name string, tags []string) error {
	if len(tags) == 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "no tags given")
	}
	if err := checkTags(tags); err != nil {
		return err
	}
	t, err := r.Template(ctx, team, name)
	if err != nil {
		return err
	}
	for _, tg := range tags {
		if err := r.store.DeleteTag(ctx, t.ID, tg); err != nil {
			return err
		}
	}
	r.prune(ctx, t.ID, "")
	return nil
}

// Tags returns a template's tags.
func (r *Registry) Tags(ctx context.Context, team, idOrName string) ([]Tag, error) {
	t, err := r.Template(ctx, team, idOrName)
	if err != nil {
		return nil, err
	}
	return r.store.Tags(ctx, t.ID)
}

// tagged returns the build a template's tag points at.
func (r *Registry) tagged(ctx context.Context, t Template, tag string) (string, error) {
	tags, err := r.store.Tags(ctx, t.ID)
	if err != nil {
		return "", err
	}
	for _, tg := range tags {
		if tg.Tag == tag {
			return tg.BuildID, nil
		}
	}
	if tag == DefaultTag {
		return "", sandbox.Errorf(sandbox.KindNotFound, "template '%s' has no successful build yet", t.Names[0])
	}
	return "", sandbox.Errorf(sandbox.KindNotFound, "template '%s' has no tag '%s'", firstName(t), tag)
}

func firstName(t Template) string {
	if len(t.Names) > 0 {
		return t.Names[0]
	}
	return t.ID
}

// Resolved is a built template as a sandbox runs it.
type Resolved struct {
	ID       string // the template's ID
	Alias    string // its name, "" when resolved by ID
	BuildID  string
	Image    string
	CPUCount int // 0 = the server's default
	MemoryMB int // 0 = the server's default
	StartCmd string
	ReadyCmd string
	User     string
	Workdir  string
	Env      map[string]string
	// AgentArgs are the agent arguments its sandboxes run with; nil = none.
	AgentArgs []string
}

// Resolve finds the template ref names for team: an ID or a name,
// optionally with ":tag". A ref that names no template, or one of another
// team that is not public, is KindNotFound, so that callers can go on to
// other kinds of template (snapshots, images).
func (r *Registry) Resolve(ctx context.Context, team, ref string) (Resolved, error) {
	return r.resolve(ctx, team, ref)
}

func (r *Registry) resolve(ctx context.Context, team, ref string) (Resolved, error) {
	name, tag, hasTag := strings.Cut(ref, ":")
	if !hasTag {
		tag = DefaultTag
	}
	t, err := r.lookup(ctx, name)
	if err != nil {
		return Resolved{}, err
	}
	if t.TeamID != team && !t.Public {
		return Resolved{}, notFound(ref)
	}
	buildID, err := r.tagged(ctx, t, tag)
	if err != nil {
		return Resolved{}, err
	}
	b, err := r.store.GetBuild(ctx, buildID)
	if err != nil {
		return Resolved{}, err
	}
	alias := ""
	if name != t.ID {
		alias = name
	}
	return Resolved{
		ID: t.ID, Alias: alias, BuildID: b.ID, Image: b.Image,
		CPUCount: b.CPUCount, MemoryMB: b.MemoryMB,
		StartCmd: b.StartCmd, ReadyCmd: b.ReadyCmd, User: b.User, Workdir: b.Workdir, Env: b.Env,
		AgentArgs: b.AgentArgs,
	}, nil
}
