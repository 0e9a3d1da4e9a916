package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/sandbox"
)

// runtimeChecks are doctor's checks of the runtime sandboxes run under:
// registered with the engine, able to run a container and, for gVisor,
// to checkpoint (experimental mode); and the disk checkpoints use. cli
// points at the engine client the first check opens.
func runtimeChecks(rt sandbox.OCIRuntime, gvName, image string, cli **client.Client) []check {
	setup := "set it up with: warren runtime setup gvisor (as root), then restart the Docker engine"
	return []check{
		{"runtime", false, func(ctx context.Context) (string, error) {
			if rt != sandbox.RuntimeGVisor {
				return "runc (the engine's default); --runtime=gvisor for gVisor", nil
			}
			if *cli == nil {
				return "", errors.New("cannot check without the docker engine")
			}
			info, err := (*cli).Info(ctx, client.InfoOptions{})
			if err != nil {
				return "", err
			}
			if _, ok := info.Info.Runtimes[gvName]; !ok {
				var names []string
				for n := range info.Info.Runtimes {
					names = append(names, n)
				}
				return "", fmt.Errorf("the engine has no runtime %q (only %s): %s", gvName, strings.Join(names, ", "), setup)
			}
			if !info.Info.ExperimentalBuild {
				return "", fmt.Errorf("runsc is registered but the engine is not in experimental mode, which checkpoints need: %s", setup)
			}
			took, err := runTiny(ctx, *cli, gvName, image)
			if err != nil {
				return "", fmt.Errorf("runsc is registered but cannot run a container: %w (see the engine's log; %s)", err, setup)
			}
			return fmt.Sprintf("gvisor: %q registered, experimental mode on, a container ran in %v", gvName, took.Round(time.Millisecond)), nil
		}},
		{"checkpoints", true, func(ctx context.Context) (string, error) {
			if *cli == nil {
				return "", errors.New("cannot check without the docker engine")
			}
			info, err := (*cli).Info(ctx, client.InfoOptions{})
			if err != nil {
				return "", err
			}
			size, n, err := docker.CheckpointDiskUsage(info.Info.DockerRootDir)
			if err != nil {
				return "", fmt.Errorf("cannot measure the checkpoints under %s (run doctor as root on the engine's host): %w", info.Info.DockerRootDir, err)
			}
			return fmt.Sprintf("%d on disk, %.1f MiB, under %s", n, float64(size)/(1<<20), info.Info.DockerRootDir), nil
		}},
	}
}

// runTiny runs `true` in image under the engine runtime name, without a
// network, and removes the container.
func runTiny(ctx context.Context, cli *client.Client, runtimeName, image string) (time.Duration, error) {
	start := time.Now()
	res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Entrypoint: []string{"true"}, Labels: map[string]string{"dev.warren.doctor": "true"}},
		HostConfig: &container.HostConfig{Runtime: runtimeName, NetworkMode: "none"},
	})
	if err != nil {
		return 0, err
	}
	defer cli.ContainerRemove(context.WithoutCancel(ctx), res.ID, client.ContainerRemoveOptions{Force: true})
	wait := cli.ContainerWait(ctx, res.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return 0, err
	}
	select {
	case r := <-wait.Result:
		if r.StatusCode != 0 {
			return 0, fmt.Errorf("the container exited with status %d", r.StatusCode)
		}
	case err := <-wait.Error:
		return 0, err
	}
	return time.Since(start), nil
}
