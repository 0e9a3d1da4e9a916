package template_test

import (
	"context"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/template"
)

// A build's fromImage names an image by its full reference only: the
// FROM line gets it in full, which the engine cannot take for an image
// ID prefix, and an image of Warren's is refused under any name.
func TestFromImageByReferenceOnly(t *testing.T) {
	snapshotID := "sha256:" + strings.Repeat("39", 32)
	eng := &fakeEngine{images: map[string]sandbox.Image{
		"docker.io/library/python:3.12": {ID: "sha256:" + strings.Repeat("ab", 32), RepoTags: []string{"python:3.12"}},
		// A snapshot the operator tagged under a plain name.
		"docker.io/library/mirror:1": {ID: snapshotID, RepoTags: []string{"mirror:1", "warren/snapshot:s1"}},
		// A committed sandbox keeps its team's label.
		"docker.io/library/stolen:1": {ID: snapshotID, RepoTags: []string{"stolen:1"}, Labels: map[string]string{sandbox.LabelTeam: "other"}},
		// An engine that found an image by something else than its name.
		"docker.io/library/odd:1": {ID: snapshotID, RepoTags: []string{"warren-template/t1:b1"}},
	}}
	reg, _, _ := newRegistry(t, eng, 2)
	ctx := context.Background()
	tpl, b, _ := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: "refused"})
	for _, tc := range []struct{ ref, want string }{
		{"mirror:1", "made for a snapshot or a template"},
		{"stolen:1", "made for a snapshot or a template"},
		{"odd:1", "made for a snapshot or a template"},
		{snapshotID, "is an image ID"},
		{"sha256:3939", "is an image ID"},
		{strings.Repeat("39", 32), "invalid fromImage"},
	} {
		wantKind(t, tc.ref, reg.StartBuild(ctx, "team1", tpl.ID, b.ID, template.BuildSpec{FromImage: tc.ref}), sandbox.KindInvalid, tc.want)
	}
	for _, tc := range []struct{ ref, from string }{
		{"python:3.12", "FROM docker.io/library/python:3.12"},
		// Not on the engine: pulled by name, never found by ID prefix.
		{"39", "FROM docker.io/library/39:latest"},
		{"e2bdev/base", "FROM warren/base"},
	} {
		tpl, b, err := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: "ok"})
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.StartBuild(ctx, "team1", tpl.ID, b.ID, template.BuildSpec{FromImage: tc.ref}); err != nil {
			t.Fatalf("%s: %v", tc.ref, err)
		}
		waitFor(t, func() bool {
			got, _, err := reg.Status(ctx, "team1", tpl.ID, b.ID, 0, 0, "")
			return err == nil && got.Status.Done()
		})
		eng.mu.Lock()
		df := string(eng.context["Dockerfile"])
		eng.mu.Unlock()
		if first, _, _ := strings.Cut(df, "\n"); first != tc.from {
			t.Errorf("fromImage %s: Dockerfile starts %q, want %q", tc.ref, first, tc.from)
		}
	}
}
