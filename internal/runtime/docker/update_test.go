package docker

import (
	"context"
	"testing"

	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

func TestUpdateLimitsAndImageID(t *testing.T) {
	rt := newTestRuntime(t)
	ctx := t.Context()
	spec := testSpec(t, importImage(t, rt))
	c, err := rt.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), c.ID) })

	imageID, err := rt.ImageID(ctx, spec.Image)
	if err != nil || imageID == "" || c.ImageID != imageID {
		t.Errorf("ImageID = %q, %v; container runs %q", imageID, err, c.ImageID)
	}
	if _, err := rt.ImageID(ctx, "warren-test-absent-"+randomID(t)); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("ImageID of a missing image: %v, want not found", err)
	}
	in, err := rt.Inspect(ctx, c.ID)
	if err != nil || in.AgentSecret != spec.AgentSecret || in.ImageID != imageID {
		t.Errorf("Inspect = %+v, %v; want secret %q and image %q", in, err, spec.AgentSecret, imageID)
	}

	// Limits change while it runs; zero ones stay.
	if err := rt.Update(ctx, c.ID, 2, 256, 0); err != nil {
		t.Fatalf("Update: %v", err)
	}
	st, err := rt.Stats(ctx, c.ID)
	if err != nil || st.MemTotal != 256<<20 {
		t.Errorf("after Update Stats = %+v, %v; want 256 MiB total", st, err)
	}
	if n := rt.engineCPUs(ctx); n >= 2 && st.CPUCount != 2 {
		t.Errorf("after Update %d CPUs, want 2", st.CPUCount)
	}
	res, err := rt.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := res.Container.HostConfig; h.PidsLimit == nil || *h.PidsLimit != int64(spec.PidsLimit) || h.MemorySwap != 256<<20 {
		t.Errorf("after Update pids %v swap %d; want pids %d kept, swap = memory", h.PidsLimit, h.MemorySwap, spec.PidsLimit)
	}
	if err := rt.Update(ctx, "absent-"+randomID(t), 1, 0, 0); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("Update of a missing container: %v, want not found", err)
	}
}
