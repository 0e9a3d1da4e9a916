package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/store"
)

// A forwarded call's answer is kept under its key, the first one kept
// stays, and another key has none.
func TestCallAnswers(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	if _, ok, err := s.CallAnswer(ctx, "k1"); ok || err != nil {
		t.Fatalf("an answer before any was kept: %v, %v", ok, err)
	}
	first := store.CallAnswer{Status: 201, ContentType: "application/json", Body: []byte(`{"sandboxID":"i1"}`)}
	if err := s.SaveCallAnswer(ctx, "k1", first); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCallAnswer(ctx, "k1", store.CallAnswer{Status: 404, ContentType: "text/plain", Body: []byte("no")}); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.CallAnswer(ctx, "k1")
	if !ok || err != nil {
		t.Fatalf("the kept answer: %v, %v", ok, err)
	}
	if diff := cmp.Diff(first, got); diff != "" {
		t.Errorf("kept answer (-want +got):\n%s", diff)
	}
	if _, ok, _ := s.CallAnswer(ctx, "k2"); ok {
		t.Error("another key has an answer")
	}
	// A kill's or a pause's answer has no body.
	if err := s.SaveCallAnswer(ctx, "k3", store.CallAnswer{Status: 204}); err != nil {
		t.Fatalf("an answer without a body: %v", err)
	}
	if got, ok, err := s.CallAnswer(ctx, "k3"); !ok || err != nil || got.Status != 204 || len(got.Body) != 0 {
		t.Errorf("the kept answer without a body: %+v, %v, %v", got, ok, err)
	}
}

// The first file shared under a name is the one kept and returned to
// every replica after.
func TestSharedFiles(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	if _, ok, err := s.SharedFile(ctx, "ca.pem"); ok || err != nil {
		t.Fatalf("a file before any was shared: %v, %v", ok, err)
	}
	if kept, err := s.ShareFile(ctx, "ca.pem", []byte("first")); err != nil || string(kept) != "first" {
		t.Fatalf("first share: %q, %v", kept, err)
	}
	if kept, err := s.ShareFile(ctx, "ca.pem", []byte("second")); err != nil || string(kept) != "first" {
		t.Fatalf("second share: %q, %v; want the first kept", kept, err)
	}
	if got, ok, err := s.SharedFile(ctx, "ca.pem"); !ok || err != nil || string(got) != "first" {
		t.Fatalf("the kept file: %q, %v, %v", got, ok, err)
	}
	// A swap from the file kept replaces it; one from another is refused.
	if kept, err := s.SwapSharedFile(ctx, "ca.pem", []byte("first"), []byte("rotated")); err != nil || string(kept) != "rotated" {
		t.Fatalf("swap from the kept file: %q, %v", kept, err)
	}
	if kept, err := s.SwapSharedFile(ctx, "ca.pem", []byte("first"), []byte("late")); err != nil || string(kept) != "rotated" {
		t.Fatalf("swap from a file replaced since: %q, %v; want the one kept", kept, err)
	}
	if kept, err := s.SwapSharedFile(ctx, "new.pem", nil, []byte("made")); err != nil || string(kept) != "made" {
		t.Fatalf("swap of a file none kept: %q, %v", kept, err)
	}
}

// Replicas take turns under the shared files' lock.
func TestLockSharedFiles(t *testing.T) {
	a, b := open(t), open(t)
	unlock, err := a.LockSharedFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func(), 1)
	go func() {
		u, err := b.LockSharedFiles(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- u
	}()
	select {
	case <-got:
		t.Fatal("a second replica took the lock while the first held it")
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	select {
	case u := <-got:
		u()
	case <-time.After(5 * time.Second):
		t.Fatal("the second replica did not get the lock once it was free")
	}
}
