package sqlite

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/template"
)

func TestTemplatesRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	tpl := template.Template{ID: "t1", TeamID: "default", Names: []string{"one"}, CPUCount: 2, CreatedAt: t0, UpdatedAt: t0}
	if err := s.PutTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	got, err := s.TemplateByName(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tpl, got); diff != "" {
		t.Errorf("by name (-want +got):\n%s", diff)
	}
	err = s.PutTemplate(ctx, template.Template{ID: "t2", TeamID: "other", Names: []string{"one"}, CreatedAt: t0})
	if sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("a taken name: %v, want conflict", err)
	}
	b := template.Build{ID: "b1", TemplateID: "t1", TeamID: "default", Status: template.StatusBuilding,
		Spec: template.BuildSpec{FromImage: "warren/base", Steps: []template.Step{{Type: "RUN", Args: []string{"true"}}}},
		Env:  map[string]string{"A": "1"}, CreatedAt: t0, UpdatedAt: t0}
	if err := s.PutBuild(ctx, b); err != nil {
		t.Fatal(err)
	}
	active, _ := s.ActiveBuilds(ctx)
	if len(active) != 1 || !cmp.Equal(active[0], b) {
		t.Errorf("ActiveBuilds = %+v", active)
	}
	for i, msg := range []string{"a", "b", "c"} {
		s.AppendBuildLog(ctx, "b1", template.LogEntry{Time: t0, Level: "info", Message: msg, Step: string(rune('1' + i))})
	}
	page, _ := s.BuildLogs(ctx, "b1", 1, 1)
	if len(page) != 1 || page[0].Message != "b" || page[0].Step != "2" {
		t.Errorf("BuildLogs(1, 1) = %+v", page)
	}
	s.SetTag(ctx, "t1", template.Tag{Tag: "default", BuildID: "b1", CreatedAt: t0})
	s.SetTag(ctx, "t1", template.Tag{Tag: "default", BuildID: "b2", CreatedAt: t0})
	if tags, _ := s.Tags(ctx, "t1"); len(tags) != 1 || tags[0].BuildID != "b2" {
		t.Errorf("Tags = %+v", tags)
	}
	if err := s.DeleteTemplate(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetBuild(ctx, "b1"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("build outlived its template: %v", err)
	}
	if logs, _ := s.BuildLogs(ctx, "b1", 0, 0); len(logs) != 0 {
		t.Errorf("logs outlived their build")
	}
	if _, err := s.TemplateByName(ctx, "one"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("name outlived its template: %v", err)
	}
	if err := s.PutTemplate(ctx, template.Template{ID: "t2", TeamID: "other", Names: []string{"one"}, CreatedAt: t0}); err != nil {
		t.Errorf("the freed name: %v", err)
	}
}
