package postgres

import (
	"testing"

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
}
