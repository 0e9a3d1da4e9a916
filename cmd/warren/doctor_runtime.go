package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/sandbox"
)

// runtimeChecks are doctor's checks of the runtime sandboxes run under:
// registered with the engine, able to run a container and, for gVisor,
// to checkpoint (experimental mode), and whether it restores memory
// images in place; and the disk checkpoints use. eng
// points at the engine's adapter the first check opens.
func runtimeChecks(rt sandbox.OCIRuntime, gvName, image string, eng **docker.Runtime) []check {
	setup := "set it up with: warren runtime setup gvisor (as root), then restart the Docker engine"
	return []check{
		{"runtime", false, func(ctx context.Context) (string, error) {
			if rt != sandbox.RuntimeGVisor {
				return "runc (the engine's default); --runtime=gvisor for gVisor", nil
			}
			if *eng == nil {
				return "", errors.New("cannot check without the docker engine")
			}
			if err := (*eng).CheckRuntime(ctx, rt); err != nil {
				return "", err
			}
			took, err := (*eng).ProbeRuntime(ctx, rt, image)
			if err != nil {
				return "", fmt.Errorf("runsc is registered but cannot run a container: %w (see the engine's log; %s)", err, setup)
			}
			restores := "resumes from disk, forks and memory snapshots restore in place (runsc-warren)"
			if inPlace, err := (*eng).RestoresInPlace(ctx); err == nil && !inPlace {
				restores = "resumes from disk, forks and memory snapshots restore through the engine's copies of their memory, slower: rerun warren runtime setup gvisor (as root) and restart the engine to register runsc-warren"
			}
			return fmt.Sprintf("gvisor: %q registered, experimental mode on, a container ran in %v; %s", gvName, took.Round(time.Millisecond), restores), nil
		}},
		{"checkpoints", true, func(ctx context.Context) (string, error) {
			if *eng == nil {
				return "", errors.New("cannot check without the docker engine")
			}
			root, err := (*eng).DataRoot(ctx)
			if err != nil {
				return "", err
			}
			size, n, err := docker.CheckpointDiskUsage(root)
			if err != nil {
				return "", fmt.Errorf("cannot measure the checkpoints under %s (run doctor as root on the engine's host): %w", root, err)
			}
			return fmt.Sprintf("%d on disk, %.1f MiB, under %s", n, float64(size)/(1<<20), root), nil
		}},
	}
}
