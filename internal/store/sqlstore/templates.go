package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/template"
)

// Templates and builds are kept as JSON beside the columns queries use,
// like sandboxes; names, tags and build logs have tables of their own.

// PutTemplate inserts or replaces a template and its names. A name is
// the primary key of template_names, so two PostgreSQL replicas giving
// one name to two templates at once conflict there, whichever commits
// second.
func (s *Store) PutTemplate(ctx context.Context, t template.Template) error {
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("encode template: %w", err)
	}
	return s.db.Tx(ctx, func(tx Querier) error {
		for _, name := range t.Names {
			var owner string
			err := tx.QueryRow(ctx, `SELECT template_id FROM template_names WHERE name = $1`, name).Scan(&owner)
			if err == nil && owner != t.ID {
				return sandbox.Errorf(sandbox.KindConflict, "template name '%s' is taken", name)
			}
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("check template name: %w", err)
			}
		}
		if _, err := tx.Exec(ctx,
			`INSERT INTO templates (id, team_id, created_at, data) VALUES ($1, $2, $3, $4)
			 ON CONFLICT (id) DO UPDATE SET team_id=excluded.team_id, data=excluded.data`,
			t.ID, t.TeamID, unixNano(t.CreatedAt), string(data)); err != nil {
			return fmt.Errorf("put template %s: %w", t.ID, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM template_names WHERE template_id = $1`, t.ID); err != nil {
			return fmt.Errorf("put template names: %w", err)
		}
		for _, name := range t.Names {
			_, err := tx.Exec(ctx, `INSERT INTO template_names (name, template_id) VALUES ($1, $2)`, name, t.ID)
			if s.dialect.Unique(err, UniqueTemplateName) {
				return sandbox.Errorf(sandbox.KindConflict, "template name '%s' is taken", name)
			}
			if err != nil {
				return fmt.Errorf("put template name: %w", err)
			}
		}
		return nil
	})
}

// GetTemplate returns a template by ID.
func (s *Store) GetTemplate(ctx context.Context, id string) (template.Template, error) {
	return getJSON[template.Template](ctx, s.db, "template", `SELECT data FROM templates WHERE id = $1`, id)
}

// TemplateByName returns the template holding name.
func (s *Store) TemplateByName(ctx context.Context, name string) (template.Template, error) {
	return getJSON[template.Template](ctx, s.db, "template",
		`SELECT t.data FROM template_names n JOIN templates t ON t.id = n.template_id WHERE n.name = $1`, name)
}

// ListTemplates returns a team's templates, or all, oldest first.
func (s *Store) ListTemplates(ctx context.Context, teamID string) ([]template.Template, error) {
	return queryJSON[template.Template](ctx, s.db,
		`SELECT data FROM templates WHERE ($1 = '' OR team_id = $1) ORDER BY created_at, id`, teamID)
}

// DeleteTemplate removes a template and everything it owns.
func (s *Store) DeleteTemplate(ctx context.Context, id string) error {
	return s.db.Tx(ctx, func(tx Querier) error {
		if err := changeOne(ctx, tx, "delete template", "template "+id+" not found", `DELETE FROM templates WHERE id = $1`, id); err != nil {
			return err
		}
		for _, q := range []string{
			`DELETE FROM template_names WHERE template_id = $1`,
			`DELETE FROM template_tags WHERE template_id = $1`,
			`DELETE FROM template_build_logs WHERE build_id IN (SELECT id FROM template_builds WHERE template_id = $1)`,
			`DELETE FROM template_builds WHERE template_id = $1`,
		} {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return fmt.Errorf("delete template: %w", err)
			}
		}
		return nil
	})
}

// PutBuild inserts or replaces a build.
func (s *Store) PutBuild(ctx context.Context, b template.Build) error {
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encode build: %w", err)
	}
	_, err = s.db.Exec(ctx,
		`INSERT INTO template_builds (id, template_id, status, created_at, data) VALUES ($1, $2, $3, $4, $5)
		 ON CONFLICT (id) DO UPDATE SET status=excluded.status, data=excluded.data`,
		b.ID, b.TemplateID, string(b.Status), unixNano(b.CreatedAt), string(data))
	if err != nil {
		return fmt.Errorf("put build %s: %w", b.ID, err)
	}
	return nil
}

// GetBuild returns a build by ID.
func (s *Store) GetBuild(ctx context.Context, id string) (template.Build, error) {
	return getJSON[template.Build](ctx, s.db, "build", `SELECT data FROM template_builds WHERE id = $1`, id)
}

// ListBuilds returns a template's builds, oldest first.
func (s *Store) ListBuilds(ctx context.Context, templateID string) ([]template.Build, error) {
	return queryJSON[template.Build](ctx, s.db,
		`SELECT data FROM template_builds WHERE template_id = $1 ORDER BY created_at, id`, templateID)
}

// ActiveBuilds returns the builds waiting or building.
func (s *Store) ActiveBuilds(ctx context.Context) ([]template.Build, error) {
	return queryJSON[template.Build](ctx, s.db,
		`SELECT data FROM template_builds WHERE status IN ($1, $2) ORDER BY created_at, id`,
		string(template.StatusWaiting), string(template.StatusBuilding))
}

// AppendBuildLog appends one entry to a build's log, its text made
// storable by the dialect (a build's output may hold NUL bytes and
// invalid UTF-8, which PostgreSQL refuses).
func (s *Store) AppendBuildLog(ctx context.Context, buildID string, e template.LogEntry) error {
	text := s.dialect.Text
	_, err := s.db.Exec(ctx,
		`INSERT INTO template_build_logs (build_id, ts, level, message, step) VALUES ($1, $2, $3, $4, $5)`,
		buildID, unixNano(e.Time), text(e.Level), text(e.Message), text(e.Step))
	if err != nil {
		return fmt.Errorf("append build log: %w", err)
	}
	return nil
}

// BuildLogs returns a build's log entries in order, from offset.
func (s *Store) BuildLogs(ctx context.Context, buildID string, offset, limit int) ([]template.LogEntry, error) {
	out, err := collect(ctx, s.db, func(row Row) (template.LogEntry, error) {
		var e template.LogEntry
		var ts int64
		err := row.Scan(&ts, &e.Level, &e.Message, &e.Step)
		e.Time = fromUnixNano(ts)
		return e, err
	}, `SELECT ts, level, message, step FROM template_build_logs WHERE build_id = $1 ORDER BY seq LIMIT $2 OFFSET $3`,
		buildID, noLimit(limit), max(offset, 0))
	if err != nil {
		return nil, fmt.Errorf("build logs: %w", err)
	}
	return out, nil
}

// SetTag points a template's tag at a build.
func (s *Store) SetTag(ctx context.Context, templateID string, t template.Tag) error {
	_, err := s.db.Exec(ctx,
		`INSERT INTO template_tags (template_id, tag, build_id, created_at) VALUES ($1, $2, $3, $4)
		 ON CONFLICT (template_id, tag) DO UPDATE SET build_id=excluded.build_id, created_at=excluded.created_at`,
		templateID, t.Tag, t.BuildID, unixNano(t.CreatedAt))
	if err != nil {
		return fmt.Errorf("set tag: %w", err)
	}
	return nil
}

// DeleteTag removes a template's tag.
func (s *Store) DeleteTag(ctx context.Context, templateID, tag string) error {
	return changeOne(ctx, s.db, "delete tag", "tag '"+tag+"' not found",
		`DELETE FROM template_tags WHERE template_id = $1 AND tag = $2`, templateID, tag)
}

// Tags returns a template's tags, oldest first.
func (s *Store) Tags(ctx context.Context, templateID string) ([]template.Tag, error) {
	out, err := collect(ctx, s.db, func(row Row) (template.Tag, error) {
		var t template.Tag
		var ts int64
		err := row.Scan(&t.Tag, &t.BuildID, &ts)
		t.CreatedAt = fromUnixNano(ts)
		return t, err
	}, `SELECT tag, build_id, created_at FROM template_tags WHERE template_id = $1 ORDER BY created_at, tag`, templateID)
	if err != nil {
		return nil, fmt.Errorf("tags: %w", err)
	}
	return out, nil
}
