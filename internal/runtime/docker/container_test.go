package docker

import (
	"context"
	"testing"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

func TestGVisorResolvConf(t *testing.T) {
	r := &Runtime{cfg: Config{GVisorRuntime: "runsc", GVisorResolvConf: "/state/resolv.conf"}}
	resolv := func(rt sandbox.OCIRuntime) *mount.Mount {
		_, host := r.containerConfig(sandbox.ContainerSpec{SandboxID: "s", Image: "i", Runtime: rt})
		for i, m := range host.Mounts {
			if m.Target == "/etc/resolv.conf" {
				return &host.Mounts[i]
			}
		}
		return nil
	}
	if m := resolv(sandbox.RuntimeGVisor); m == nil || m.Source != "/state/resolv.conf" || !m.ReadOnly || m.Type != mount.TypeBind {
		t.Errorf("gVisor sandbox: resolv.conf mount %+v", m)
	}
	if m := resolv(sandbox.RuntimeRunc); m != nil {
		t.Errorf("runc sandbox has a resolv.conf mount %+v: the engine's embedded DNS works there", m)
	}
	r.cfg.GVisorResolvConf = ""
	if m := resolv(sandbox.RuntimeGVisor); m != nil {
		t.Errorf("no GVisorResolvConf, yet a mount %+v", m)
	}
}

// TestDiskSize creates a container with a disk size: on an engine whose
// storage has quotas it gets the size as its storage option; on any other
// (overlay2 on ext4, as here) the create still succeeds, without it, and
// the runtime stops asking.
func TestDiskSize(t *testing.T) {
	rt := newTestRuntime(t)
	ctx := t.Context()
	image := importImage(t, rt)
	for range 2 {
		spec := testSpec(t, image)
		spec.DiskMB = 64
		c, err := rt.Create(ctx, spec)
		if err != nil {
			t.Fatalf("Create with a disk size: %v", err)
		}
		t.Cleanup(func() { rt.Remove(context.Background(), c.ID) })
		res, err := rt.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := res.Container.HostConfig.StorageOpt["size"]
		absent := rt.diskQuotas.Load() == quotasAbsent
		if absent && got != "" || !absent && got != "64M" {
			t.Errorf("storage size %q with quotas absent=%v", got, absent)
		}
		// Stats reports the enforced size as the disk's total, and no
		// total where none is enforced.
		want := int64(64 << 20)
		if absent {
			want = 0
		}
		if st, err := rt.Stats(ctx, c.ID); err != nil || st.DiskTotal != want || st.DiskUsed != 0 {
			t.Errorf("Stats = %+v, %v; want disk total %d", st, err, want)
		}
	}
}
