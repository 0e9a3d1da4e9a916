package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

// ProbeRuntime runs `true` in image under rt, without a network, removes
// the container, and returns how long the run took: that the engine
// can run a container under rt at all, which CheckRuntime's look at its
// configuration does not prove.
func (r *Runtime) ProbeRuntime(ctx context.Context, rt sandbox.OCIRuntime, image string) (time.Duration, error) {
	host := &container.HostConfig{NetworkMode: "none"}
	if rt == sandbox.RuntimeGVisor {
		host.Runtime = r.cfg.GVisorRuntime
	}
	start := time.Now()
	res, err := r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Entrypoint: []string{"true"}, Labels: map[string]string{"dev.warren.doctor": "true"}},
		HostConfig: host,
	})
	if err != nil {
		return 0, err
	}
	defer r.cli.ContainerRemove(context.WithoutCancel(ctx), res.ID, client.ContainerRemoveOptions{Force: true})
	wait := r.cli.ContainerWait(ctx, res.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := r.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return 0, err
	}
	select {
	case w := <-wait.Result:
		if w.StatusCode != 0 {
			return 0, fmt.Errorf("the container exited with status %d", w.StatusCode)
		}
	case err := <-wait.Error:
		return 0, err
	}
	return time.Since(start), nil
}
