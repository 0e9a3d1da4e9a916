package docker

import (
	"testing"

	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

// A Runtime opened without an agent answers for the engine, as warren
// doctor asks it: it runs a probe container under runc and leaves none
// behind; but it creates no sandbox.
func TestOpenProbeRuntime(t *testing.T) {
	newTestRuntime(t) // skips without an engine
	rt, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx := t.Context()
	if ok, err := rt.ImageExists(ctx, sandbox.BaseImage); err != nil || !ok {
		t.Skipf("skipping: the probe runs true in %s, which is missing (warren image build): %v", sandbox.BaseImage, err)
	}
	if took, err := rt.ProbeRuntime(ctx, sandbox.RuntimeRunc, sandbox.BaseImage); err != nil || took <= 0 {
		t.Fatalf("ProbeRuntime = %v, %v", took, err)
	}
	left, err := rt.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", "dev.warren.doctor=true")})
	if err != nil || len(left.Items) > 0 {
		t.Errorf("probe containers left: %+v, %v", left.Items, err)
	}
	if _, err := rt.ProbeRuntime(ctx, sandbox.RuntimeRunc, "warren-test-no-such-image:latest"); err == nil {
		t.Error("a probe of a missing image succeeded")
	}
	if _, err := rt.Create(ctx, sandbox.ContainerSpec{SandboxID: "inoagent", Image: sandbox.BaseImage}); sandbox.KindOf(err) != sandbox.KindInternal {
		t.Errorf("Create without an agent: %v, want an internal error", err)
	}
}
