package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

// The engine finds an image by a prefix of its ID as readily as by its
// name; only NamedBy tells them apart. Its full reference runs it, and a
// sandbox's commit keeps the team label that marks it Warren's.
func TestInspectImageByReference(t *testing.T) {
	rt := newTestRuntime(t)
	ctx := t.Context()
	ref := importImage(t, rt)
	named, err := sandbox.ParseImageRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := rt.InspectImage(ctx, named.String())
	if err != nil || !img.NamedBy(named) || img.Warrens() {
		t.Fatalf("InspectImage(%s) = %+v, %v; want it named by its reference, not Warren's", named, img, err)
	}
	byPrefix, err := rt.InspectImage(ctx, strings.TrimPrefix(img.ID, "sha256:")[:12])
	if err != nil || byPrefix.ID != img.ID {
		t.Fatalf("InspectImage by ID prefix = %+v, %v; the engine should find it", byPrefix, err)
	}
	prefix, _ := sandbox.ParseImageRef(strings.TrimPrefix(img.ID, "sha256:")[:12])
	if byPrefix.NamedBy(prefix) {
		t.Errorf("image %v is named by its ID prefix", byPrefix.RepoTags)
	}
	if _, err := rt.InspectImage(ctx, prefix.String()); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("InspectImage(%s): %v, want not found: in full, a prefix is a name the engine lacks", prefix, err)
	}

	c, err := rt.Create(ctx, testSpec(t, named.String()))
	if err != nil {
		t.Fatalf("create from %s: %v", named, err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), c.ID) })
	snap := "warren-test-" + randomID(t) + ":snap"
	if _, err := rt.Commit(ctx, c.ID, snap); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.RemoveImage(context.Background(), snap) })
	committed, err := rt.InspectImage(ctx, snap)
	if err != nil || !committed.Warrens() {
		t.Errorf("committed image %+v, %v: want it Warren's by its team label", committed, err)
	}
}
