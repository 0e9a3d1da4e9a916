package docker

import (
	"testing"

	"github.com/moby/moby/api/types/mount"

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
