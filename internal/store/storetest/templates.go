package storetest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/template"
)

func testTemplates(t *testing.T, s Store) {
	ctx := t.Context()
	tpl := template.Template{ID: "t1", TeamID: "default", Names: []string{"one", "uno"}, CPUCount: 2, CreatedAt: t0, UpdatedAt: t0}
	if err := s.PutTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	got, err := s.TemplateByName(ctx, "uno")
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
	if _, err := s.GetTemplate(ctx, "t2"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("a template refused for its name was stored: %v", err)
	}
	// A put replaces the names: the one left out is free again.
	tpl.Names = []string{"one"}
	if err := s.PutTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TemplateByName(ctx, "uno"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("a dropped name still found: %v", err)
	}
	if list, _ := s.ListTemplates(ctx, ""); len(list) != 1 || list[0].ID != "t1" {
		t.Errorf("ListTemplates = %+v", list)
	}
	if list, _ := s.ListTemplates(ctx, "other"); len(list) != 0 {
		t.Errorf("ListTemplates of another team = %+v", list)
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
	done := b
	done.Status = template.StatusReady
	if err := s.PutBuild(ctx, done); err != nil {
		t.Fatal(err)
	}
	if active, _ := s.ActiveBuilds(ctx); len(active) != 0 {
		t.Errorf("ActiveBuilds after the build = %+v", active)
	}
	if builds, _ := s.ListBuilds(ctx, "t1"); len(builds) != 1 || !cmp.Equal(builds[0], done) {
		t.Errorf("ListBuilds = %+v", builds)
	}
	for i, msg := range []string{"a", "b", "c"} {
		if err := s.AppendBuildLog(ctx, "b1", template.LogEntry{Time: t0, Level: "info", Message: msg, Step: string(rune('1' + i))}); err != nil {
			t.Fatal(err)
		}
	}
	page, _ := s.BuildLogs(ctx, "b1", 1, 1)
	if len(page) != 1 || page[0].Message != "b" || page[0].Step != "2" {
		t.Errorf("BuildLogs(1, 1) = %+v", page)
	}
	if all, _ := s.BuildLogs(ctx, "b1", 0, 0); len(all) != 3 {
		t.Errorf("BuildLogs(0, 0) = %+v, want all 3", all)
	}
	for _, tag := range []template.Tag{{Tag: "default", BuildID: "b1", CreatedAt: t0}, {Tag: "default", BuildID: "b2", CreatedAt: t0}, {Tag: "v1", BuildID: "b1", CreatedAt: t0}} {
		if err := s.SetTag(ctx, "t1", tag); err != nil {
			t.Fatal(err)
		}
	}
	if tags, _ := s.Tags(ctx, "t1"); len(tags) != 2 || tags[0].BuildID != "b2" {
		t.Errorf("Tags = %+v", tags)
	}
	if err := s.DeleteTag(ctx, "t1", "v1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTag(ctx, "t1", "v1"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("deleting a tag again: %v, want not found", err)
	}
	if err := s.DeleteTemplate(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTemplate(ctx, "t1"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("deleting a template again: %v, want not found", err)
	}
	if _, err := s.GetBuild(ctx, "b1"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("build outlived its template: %v", err)
	}
	if logs, _ := s.BuildLogs(ctx, "b1", 0, 0); len(logs) != 0 {
		t.Errorf("logs outlived their build")
	}
	if tags, _ := s.Tags(ctx, "t1"); len(tags) != 0 {
		t.Errorf("tags outlived their template: %+v", tags)
	}
	if _, err := s.TemplateByName(ctx, "one"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("name outlived its template: %v", err)
	}
	if err := s.PutTemplate(ctx, template.Template{ID: "t2", TeamID: "other", Names: []string{"one"}, CreatedAt: t0}); err != nil {
		t.Errorf("the freed name: %v", err)
	}
}

// A build's output may hold NUL bytes and invalid UTF-8: its log keeps
// the line, and what can be read of it.
func testBuildLogText(t *testing.T, s Store) {
	ctx := t.Context()
	e := template.LogEntry{Time: t0, Level: "info", Message: "before\x00\xff\xfeafter", Step: "1"}
	if err := s.AppendBuildLog(ctx, "b1", e); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLog(ctx, sandbox.LogEntry{SandboxID: "i1", Time: t0, Level: "info", Message: e.Message}); err != nil {
		t.Fatal(err)
	}
	logs, err := s.BuildLogs(ctx, "b1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 1 || !strings.HasPrefix(logs[0].Message, "before") || !strings.HasSuffix(logs[0].Message, "after") {
		t.Errorf("build log = %+v, want the line", logs)
	}
	if got, _ := s.Logs(ctx, "i1", sandbox.LogQuery{}); len(got) != 1 || !strings.HasSuffix(got[0].Message, "after") {
		t.Errorf("sandbox log = %+v, want the line", got)
	}
}
