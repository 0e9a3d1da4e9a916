package process

import (
	"context"
	"testing"
	"time"
)

// A deadline that has come counts before its timer fires: the process's
// own timer, for the same instant, may have killed it first.
func TestDeadlinePassed(t *testing.T) {
	if deadlinePassed(context.Background()) {
		t.Error("passed without a deadline")
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
	defer cancel()
	if deadlinePassed(ctx) {
		t.Error("passed an hour early")
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if !deadlinePassed(ctx) {
		t.Error("not passed once cancelled")
	}
	// A deadline in the past: Deadline says so whether or not the timer
	// has fired (WithDeadline ends such a context at once, so look at a
	// context that only reports one).
	if !deadlinePassed(pastDeadline{context.Background()}) {
		t.Error("not passed at its deadline, its timer not fired")
	}
}

type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }
