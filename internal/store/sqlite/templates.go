package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/template"
)

// Templates and builds are kept as JSON beside the columns queries use,
// like sandboxes; names, tags and build logs have tables of their own.

var _ template.Store = (*DB)(nil)

// PutTemplate inserts or replaces a template and its names.
func (s *DB) PutTemplate(ctx context.Context, t template.Template) error {
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("encode template: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, name := range t.Names {
		var owner string
		err := tx.QueryRowContext(ctx, `SELECT template_id FROM template_names WHERE name = ?`, name).Scan(&owner)
		if err == nil && owner != t.ID {
			return sandbox.Errorf(sandbox.KindConflict, "template name '%s' is taken", name)
		}
		if err != nil && err != sql.ErrNoRows {
			return fmt.Errorf("check template name: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO templates (id, team_id, created_at, data) VALUES (?, ?, ?, ?)
		 ON CONFLICT(id) DO UPDATE SET team_id=excluded.team_id, data=excluded.data`,
		t.ID, t.TeamID, unixNano(t.CreatedAt), string(data)); err != nil {
		return fmt.Errorf("put template %s: %w", t.ID, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM template_names WHERE template_id = ?`, t.ID); err != nil {
		return fmt.Errorf("put template names: %w", err)
	}
	for _, name := range t.Names {
		if _, err := tx.ExecContext(ctx, `INSERT INTO template_names (name, template_id) VALUES (?, ?)`, name, t.ID); err != nil {
			return fmt.Errorf("put template name: %w", err)
		}
	}
	return tx.Commit()
}

// GetTemplate returns a template by ID.
func (s *DB) GetTemplate(ctx context.Context, id string) (template.Template, error) {
	var data string
	if err := s.db.QueryRowContext(ctx, `SELECT data FROM templates WHERE id = ?`, id).Scan(&data); err != nil {
		return template.Template{}, notFound(err, "template")
	}
	return decodeJSON[template.Template](data)
}

// TemplateByName returns the template holding name.
func (s *DB) TemplateByName(ctx context.Context, name string) (template.Template, error) {
	var data string
	err := s.db.QueryRowContext(ctx,
		`SELECT t.data FROM template_names n JOIN templates t ON t.id = n.template_id WHERE n.name = ?`, name).Scan(&data)
	if err != nil {
		return template.Template{}, notFound(err, "template")
	}
	return decodeJSON[template.Template](data)
}

// ListTemplates returns a team's templates, or all, oldest first.
func (s *DB) ListTemplates(ctx context.Context, teamID string) ([]template.Template, error) {
	return queryJSON[template.Template](ctx, s.db,
		`SELECT data FROM templates WHERE (? = '' OR team_id = ?) ORDER BY created_at, id`, teamID, teamID)
}

// DeleteTemplate removes a template and everything it owns.
func (s *DB) DeleteTemplate(ctx context.Context, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM templates WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete template: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return sandbox.Errorf(sandbox.KindNotFound, "template %s not found", id)
	}
	for _, q := range []string{
		`DELETE FROM template_names WHERE template_id = ?`,
		`DELETE FROM template_tags WHERE template_id = ?`,
		`DELETE FROM template_build_logs WHERE build_id IN (SELECT id FROM template_builds WHERE template_id = ?)`,
		`DELETE FROM template_builds WHERE template_id = ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, id); err != nil {
			return fmt.Errorf("delete template: %w", err)
		}
	}
	return tx.Commit()
}

// PutBuild inserts or replaces a build.
func (s *DB) PutBuild(ctx context.Context, b template.Build) error {
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encode build: %w", err)
	}
	_, err = s.db.ExecContext(ctx,
		`INSERT INTO template_builds (id, template_id, status, created_at, data) VALUES (?, ?, ?, ?, ?)
		 ON CONFLICT(id) DO UPDATE SET status=excluded.status, data=excluded.data`,
		b.ID, b.TemplateID, string(b.Status), unixNano(b.CreatedAt), string(data))
	if err != nil {
		return fmt.Errorf("put build %s: %w", b.ID, err)
	}
	return nil
}

// GetBuild returns a build by ID.
func (s *DB) GetBuild(ctx context.Context, id string) (template.Build, error) {
	var data string
	if err := s.db.QueryRowContext(ctx, `SELECT data FROM template_builds WHERE id = ?`, id).Scan(&data); err != nil {
		return template.Build{}, notFound(err, "build")
	}
	return decodeJSON[template.Build](data)
}

// ListBuilds returns a template's builds, oldest first.
func (s *DB) ListBuilds(ctx context.Context, templateID string) ([]template.Build, error) {
	return queryJSON[template.Build](ctx, s.db,
		`SELECT data FROM template_builds WHERE template_id = ? ORDER BY created_at, id`, templateID)
}

// ActiveBuilds returns the builds waiting or building.
func (s *DB) ActiveBuilds(ctx context.Context) ([]template.Build, error) {
	return queryJSON[template.Build](ctx, s.db,
		`SELECT data FROM template_builds WHERE status IN (?, ?) ORDER BY created_at, id`,
		string(template.StatusWaiting), string(template.StatusBuilding))
}

// AppendBuildLog appends one entry to a build's log.
func (s *DB) AppendBuildLog(ctx context.Context, buildID string, e template.LogEntry) error {
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO template_build_logs (build_id, ts, level, message, step) VALUES (?, ?, ?, ?, ?)`,
		buildID, unixNano(e.Time), e.Level, e.Message, e.Step)
	if err != nil {
		return fmt.Errorf("append build log: %w", err)
	}
	return nil
}

// BuildLogs returns a build's log entries in order, from offset.
func (s *DB) BuildLogs(ctx context.Context, buildID string, offset, limit int) ([]template.LogEntry, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := s.db.QueryContext(ctx,
		`SELECT ts, level, message, step FROM template_build_logs WHERE build_id = ? ORDER BY seq LIMIT ? OFFSET ?`,
		buildID, limit, max(offset, 0))
	if err != nil {
		return nil, fmt.Errorf("build logs: %w", err)
	}
	defer rows.Close()
	var out []template.LogEntry
	for rows.Next() {
		var e template.LogEntry
		var ts int64
		if err := rows.Scan(&ts, &e.Level, &e.Message, &e.Step); err != nil {
			return nil, err
		}
		e.Time = fromUnixNano(ts)
		out = append(out, e)
	}
	return out, rows.Err()
}

// SetTag points a template's tag at a build.
func (s *DB) SetTag(ctx context.Context, templateID string, t template.Tag) error {
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO template_tags (template_id, tag, build_id, created_at) VALUES (?, ?, ?, ?)
		 ON CONFLICT(template_id, tag) DO UPDATE SET build_id=excluded.build_id, created_at=excluded.created_at`,
		templateID, t.Tag, t.BuildID, unixNano(t.CreatedAt))
	if err != nil {
		return fmt.Errorf("set tag: %w", err)
	}
	return nil
}

// DeleteTag removes a template's tag.
func (s *DB) DeleteTag(ctx context.Context, templateID, tag string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM template_tags WHERE template_id = ? AND tag = ?`, templateID, tag)
	if err != nil {
		return fmt.Errorf("delete tag: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return sandbox.Errorf(sandbox.KindNotFound, "tag '%s' not found", tag)
	}
	return nil
}

// Tags returns a template's tags, oldest first.
func (s *DB) Tags(ctx context.Context, templateID string) ([]template.Tag, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT tag, build_id, created_at FROM template_tags WHERE template_id = ? ORDER BY created_at, tag`, templateID)
	if err != nil {
		return nil, fmt.Errorf("tags: %w", err)
	}
	defer rows.Close()
	var out []template.Tag
	for rows.Next() {
		var t template.Tag
		var ts int64
		if err := rows.Scan(&t.Tag, &t.BuildID, &ts); err != nil {
			return nil, err
		}
		t.CreatedAt = fromUnixNano(ts)
		out = append(out, t)
	}
	return out, rows.Err()
}

func decodeJSON[T any](data string) (T, error) {
	var v T
	if err := json.NewDecoder(strings.NewReader(data)).Decode(&v); err != nil {
		return v, fmt.Errorf("decode %T: %w", v, err)
	}
	return v, nil
}

func queryJSON[T any](ctx context.Context, db *sql.DB, q string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		v, err := decodeJSON[T](data)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
