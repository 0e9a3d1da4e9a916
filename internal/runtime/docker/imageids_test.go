package docker

import (
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

// kept reports whether the Runtime keeps an answer to ImageID of ref.
func kept(rt *Runtime, ref string) bool {
	rt.images.mu.Lock()
	defer rt.images.mu.Unlock()
	_, ok := rt.images.ids[ref]
	return ok
}

// waitUntil polls cond every 20 ms until it holds, or fails the test
// after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
	}
}

func TestImageIDsFollowTheEngine(t *testing.T) {
	rt := newTestRuntime(t)
	ctx := t.Context()
	ref, other := importImage(t, rt), importImage(t, rt, "other/")
	idOther, err := rt.ImageID(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	waitUntil(t, 10*time.Second, "the answer to be kept once the engine's image events are followed", func() bool {
		id, err = rt.ImageID(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		return kept(rt, ref)
	})
	if id == idOther {
		t.Fatalf("two different images have one ID %s", id)
	}

	// Tagged behind the Runtime's back: its event makes the new answer seen.
	cli, err := Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.ImageTag(ctx, client.ImageTagOptions{Source: other, Target: ref}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the retagged image's ID", func() bool {
		got, err := rt.ImageID(ctx, ref)
		return err == nil && got == idOther
	})
}

func TestImageIDsForgottenByTheRuntimesOwnChanges(t *testing.T) {
	rt := newTestRuntime(t)
	ctx := t.Context()
	ref := importImage(t, rt)
	// As if the engine's events were followed, with none arriving: what
	// forgets the answer is the Runtime's own removal.
	rt.images.started = true
	rt.images.forget(true)
	if _, err := rt.ImageID(ctx, ref); err != nil || !kept(rt, ref) {
		t.Fatalf("ImageID: %v; kept %v", err, kept(rt, ref))
	}
	if err := rt.RemoveImage(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if got, err := rt.ImageID(ctx, ref); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("ImageID right after RemoveImage = %q, %v; want not found", got, err)
	}
}
