package docker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

// TestWatchContainers: the stream carries the freezes, thaws, deaths and
// removals of this server's containers, whoever caused them (here a
// docker kill behind the runtime's back), and nothing of another
// server's; it closes when its context ends. An event may come twice.
func TestWatchContainers(t *testing.T) {
	rt := newTestRuntime(t)
	other := newTestRuntime(t)
	ctx := t.Context()
	image := importImage(t, rt)
	c, err := rt.Create(ctx, testSpec(t, image))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), c.ID) })
	oc, err := other.Create(ctx, testSpec(t, image))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Remove(context.Background(), oc.ID) })

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := rt.WatchContainers(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Stop(ctx, oc.ID); err != nil {
		t.Fatal(err)
	}
	if err := rt.Freeze(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if err := rt.Thaw(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.cli.ContainerKill(ctx, c.ID, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Remove(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	want := []sandbox.ContainerAction{sandbox.ContainerPaused, sandbox.ContainerUnpaused, sandbox.ContainerDied, sandbox.ContainerDestroyed}
	var got []sandbox.ContainerAction
	timeout := time.After(10 * time.Second)
	for !slices.Contains(got, sandbox.ContainerDestroyed) {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("stream closed after %v", got)
			}
			if ev.ContainerID != c.ID {
				t.Errorf("event of another container: %+v", ev)
				continue
			}
			got = append(got, ev.Action)
		case <-timeout:
			t.Fatalf("events = %v, want %v", got, want)
		}
	}
	// The engine may log a pause or thaw twice, the second time later
	// (its API call and its containerd event race), so only the order of
	// first occurrences counts.
	var first []sandbox.ContainerAction
	for _, a := range got {
		if !slices.Contains(first, a) {
			first = append(first, a)
		}
	}
	if !slices.Equal(first, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	cancel()
	for range events { // drains and ends
	}
}
