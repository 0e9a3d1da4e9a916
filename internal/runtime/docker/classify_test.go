package docker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/warrenhq/warren/internal/sandbox"
)

// TestClassify: each class of engine error becomes the kind the edges
// answer with, wrapped or not, and keeps its message apart from the
// engine's.
func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want sandbox.Kind
	}{
		{cerrdefs.ErrNotFound, sandbox.KindNotFound},
		{cerrdefs.ErrConflict, sandbox.KindConflict},
		{cerrdefs.ErrAlreadyExists, sandbox.KindConflict},
		{cerrdefs.ErrFailedPrecondition, sandbox.KindConflict},
		{cerrdefs.ErrInvalidArgument, sandbox.KindInvalid},
		{cerrdefs.ErrUnavailable, sandbox.KindUnavailable},
		{context.DeadlineExceeded, sandbox.KindUnavailable},
		{context.Canceled, sandbox.KindUnavailable},
		{cerrdefs.ErrPermissionDenied, sandbox.KindInternal},
		{errors.New("something else"), sandbox.KindInternal},
	} {
		for _, err := range []error{tt.err, fmt.Errorf("engine said: %w", tt.err)} {
			got := classify(err, "cannot do it")
			if k := sandbox.KindOf(got); k != tt.want {
				t.Errorf("classify(%v): kind %d, want %d", err, k, tt.want)
			}
			if m := sandbox.Message(got); m != "cannot do it" {
				t.Errorf("classify(%v): message %q", err, m)
			}
			if !errors.Is(got, tt.err) {
				t.Errorf("classify(%v) lost the engine's error", err)
			}
		}
	}
	if classify(nil, "x") != nil {
		t.Error("classify(nil) is not nil")
	}
}
