package docker

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/phases"
	"github.com/warrenhq/warren/internal/sandbox"
)

// agentPort is the agent's port as Docker names it.
func agentPort() network.Port {
	p, _ := network.PortFrom(sandbox.AgentPort, network.TCP)
	return p
}

// States of Runtime.diskQuotas: whether the engine can limit a container's
// writable layer, as learnt from the first create that asked it to.
const (
	quotasUnknown int32 = iota
	quotasAbsent
)

// agentSecretEnv carries the agent secret into the container.
const agentSecretEnv = "WARREN_AGENT_SECRET"

// ContainerName is the Docker name of a sandbox's container.
func ContainerName(sandboxID string) string { return "warren-" + sandboxID }

// Create creates and starts the sandbox's container. On any failure after
// the container exists it is removed, so a failed Create leaks nothing.
func (r *Runtime) Create(ctx context.Context, spec sandbox.ContainerSpec) (sandbox.Container, error) {
	id, err := r.createContainer(ctx, spec)
	if err != nil {
		return sandbox.Container{}, err
	}
	c, err := r.Start(ctx, id)
	if err != nil {
		r.removeQuietly(ctx, id)
		return sandbox.Container{}, err
	}
	return c, nil
}

// createContainer creates the sandbox's container, not started, and
// returns its ID.
func (r *Runtime) createContainer(ctx context.Context, spec sandbox.ContainerSpec) (string, error) {
	if spec.SandboxID == "" || spec.Image == "" {
		return "", sandbox.Errorf(sandbox.KindInvalid, "sandbox ID and image are required")
	}
	if r.cfg.AgentPath == "" {
		return "", sandbox.Errorf(sandbox.KindInternal, "docker runtime: opened without an agent binary")
	}
	// The engine refuses more CPUs than it has; a sandbox asking for more
	// gets them all instead.
	if n := r.engineCPUs(ctx); n > 0 && spec.CPUCount > n {
		spec.CPUCount = n
	}
	if err := r.ensureNetworkOnce(ctx); err != nil {
		return "", err
	}
	cfg, host := r.containerConfig(spec)
	if spec.DiskMB > 0 && r.diskQuotas.Load() != quotasAbsent {
		host.StorageOpt = map[string]string{"size": strconv.Itoa(spec.DiskMB) + "M"}
	}
	create := func() (client.ContainerCreateResult, error) {
		return r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name:       ContainerName(spec.SandboxID),
			Config:     cfg,
			HostConfig: host,
		})
	}
	res, err := create()
	if err != nil && host.StorageOpt != nil && strings.Contains(err.Error(), "storage-opt") {
		// The engine's storage has no quotas: say so once, then go without.
		if r.diskQuotas.Swap(quotasAbsent) != quotasAbsent {
			r.log.WarnContext(ctx, "sandbox disk sizes are not enforced: the engine's storage cannot limit a container's writable layer "+
				"(it needs overlay2 on xfs mounted with pquota)", "err", err)
		}
		host.StorageOpt = nil
		res, err = create()
	}
	if err != nil {
		return "", classify(err, "cannot create the sandbox's container")
	}
	phases.Mark(ctx, "engine_create")
	return res.ID, nil
}

// engineCPUs returns the engine's CPU count, 0 when it cannot tell. It
// asks the engine once.
func (r *Runtime) engineCPUs(ctx context.Context) int {
	r.mu.Lock()
	n := r.ncpu
	r.mu.Unlock()
	if n > 0 {
		return n
	}
	info, err := r.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ncpu = info.Info.NCPU
	return r.ncpu
}

func (r *Runtime) containerConfig(spec sandbox.ContainerSpec) (*container.Config, *container.HostConfig) {
	labels := spec.EngineLabels(r.cfg.Instance)

	cfg := &container.Config{
		Image:    spec.Image,
		Hostname: spec.SandboxID,
		// Root whatever the image says; the agent drops to users per
		// process. A numeric user needs no /etc/passwd in the image.
		User:       "0:0",
		Entrypoint: []string{AgentMountPath},
		// The agent's arguments. An explicit entrypoint already discards
		// the image's CMD, so nil means none.
		Cmd:          slices.Clone(spec.AgentArgs),
		Env:          []string{agentSecretEnv + "=" + spec.AgentSecret},
		Labels:       labels,
		ExposedPorts: network.PortSet{agentPort(): {}},
	}
	noInit := false
	host := &container.HostConfig{
		NetworkMode: container.NetworkMode(r.cfg.Network),
		PortBindings: network.PortMap{agentPort(): {{
			HostIP: netip.AddrFrom4([4]byte{127, 0, 0, 1}),
			// Empty HostPort: the engine picks a free ephemeral port.
		}}},
		Mounts: []mount.Mount{{
			Type:     mount.TypeBind,
			Source:   r.cfg.AgentPath,
			Target:   AgentMountPath,
			ReadOnly: true,
		}},
		CapDrop: []string{"ALL"},
		CapAdd:  r.cfg.Caps,
		Init:    &noInit, // the agent is PID 1 and reaps zombies itself
		// SecurityOpt stays empty: the engine's default seccomp and
		// AppArmor profiles apply.
		Resources: container.Resources{Ulimits: []*container.Ulimit{
			{Name: "nofile", Soft: int64(r.cfg.OpenFiles), Hard: int64(r.cfg.OpenFiles)},
		}},
	}
	for _, mt := range spec.Mounts {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: mt.Source, Target: mt.Target})
	}
	if spec.Runtime == sandbox.RuntimeGVisor {
		host.Runtime = r.cfg.GVisorRuntime
		if r.cfg.GVisorResolvConf != "" {
			host.Mounts = append(host.Mounts, mount.Mount{
				Type: mount.TypeBind, Source: r.cfg.GVisorResolvConf, Target: "/etc/resolv.conf", ReadOnly: true,
			})
		}
	}
	if spec.CPUCount > 0 {
		host.NanoCPUs = int64(spec.CPUCount) * 1e9
	}
	if spec.MemoryMB > 0 {
		host.Memory = int64(spec.MemoryMB) << 20
		host.MemorySwap = host.Memory // no swap beyond the limit
	}
	if spec.PidsLimit > 0 {
		pids := int64(spec.PidsLimit)
		host.PidsLimit = &pids
	}
	return cfg, host
}

// Start starts a created or stopped container and returns it with its
// (possibly new) AgentAddr.
func (r *Runtime) Start(ctx context.Context, id string) (sandbox.Container, error) {
	if _, err := r.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return sandbox.Container{}, classify(err, "cannot start the sandbox's container")
	}
	phases.Mark(ctx, "engine_start")
	c, err := r.Inspect(ctx, id)
	if err != nil {
		return sandbox.Container{}, err
	}
	phases.Mark(ctx, "engine_inspect")
	if c.AgentAddr == "" {
		return sandbox.Container{}, sandbox.Errorf(sandbox.KindInternal, "the sandbox's container has no published agent port")
	}
	return c, nil
}

// Stop stops a container, killing it after Config.StopTimeout.
func (r *Runtime) Stop(ctx context.Context, id string) error {
	secs := int(r.cfg.StopTimeout / time.Second)
	_, err := r.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs})
	return classify(err, "cannot stop the sandbox's container")
}

// Update changes a running container's CPU, memory and process limits;
// a zero limit is left unchanged. Like Create, it caps CPUs at the
// engine's count.
func (r *Runtime) Update(ctx context.Context, id string, cpuCount, memoryMB, pidsLimit int) error {
	if n := r.engineCPUs(ctx); n > 0 && cpuCount > n {
		cpuCount = n
	}
	var res container.Resources
	if cpuCount > 0 {
		res.NanoCPUs = int64(cpuCount) * 1e9
	}
	if memoryMB > 0 {
		res.Memory = int64(memoryMB) << 20
		res.MemorySwap = res.Memory
	}
	if pidsLimit > 0 {
		pids := int64(pidsLimit)
		res.PidsLimit = &pids
	}
	_, err := r.cli.ContainerUpdate(ctx, id, client.ContainerUpdateOptions{Resources: &res})
	return classify(err, "cannot update the sandbox's limits")
}

// Freeze pauses every process of a running container; memory is kept.
func (r *Runtime) Freeze(ctx context.Context, id string) error {
	return retryConflict(ctx, func() error {
		_, err := r.cli.ContainerPause(ctx, id, client.ContainerPauseOptions{})
		return classify(err, "cannot freeze the sandbox's container")
	})
}

// Thaw resumes a frozen container.
func (r *Runtime) Thaw(ctx context.Context, id string) error {
	return retryConflict(ctx, func() error {
		_, err := r.cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
		return classify(err, "cannot thaw the sandbox's container")
	})
}

// retryConflict retries op briefly while the engine answers conflict. The
// engine records a pause or unpause when containerd's event arrives, after
// the call has returned, so an unpause right after a pause may be told the
// container "is not paused" for a few milliseconds.
func retryConflict(ctx context.Context, op func() error) error {
	const tries, step = 20, 25 * time.Millisecond
	var err error
	for range tries {
		if err = op(); sandbox.KindOf(err) != sandbox.KindConflict {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(step):
		}
	}
	return err
}

// Remove kills and removes a container and its anonymous volumes.
func (r *Runtime) Remove(ctx context.Context, id string) error {
	// runsc refuses to signal a paused container: the engine then removes
	// the container but leaves runsc's sandbox and its containerd shim
	// running. Thawing first works under both runtimes.
	if res, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err == nil &&
		res.Container.State != nil && res.Container.State.Paused {
		if err := r.Thaw(ctx, id); err != nil {
			r.log.WarnContext(ctx, "thawing a paused container before removing it", logkey.Container, id, "err", err)
		}
	}
	_, err := r.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	r.forgetSample(id)
	return classify(err, "cannot remove the sandbox's container")
}

// removeQuietly removes a container during cleanup of a failed operation,
// even when ctx is already cancelled.
func (r *Runtime) removeQuietly(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := r.Remove(ctx, id); err != nil {
		r.log.WarnContext(ctx, "cleanup: removing container", logkey.Container, id, "err", err)
	}
}

// Inspect returns a container's current state. Running is true for a
// frozen container too (its processes exist); Paused tells them apart.
func (r *Runtime) Inspect(ctx context.Context, id string) (sandbox.Container, error) {
	res, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return sandbox.Container{}, classify(err, "cannot inspect the sandbox's container")
	}
	ci := res.Container
	c := sandbox.Container{ID: ci.ID}
	if ci.Config != nil {
		c.Labels = ci.Config.Labels
		c.SandboxID = ci.Config.Labels[sandbox.LabelSandbox]
		for _, kv := range ci.Config.Env {
			if v, ok := strings.CutPrefix(kv, agentSecretEnv+"="); ok {
				c.AgentSecret = v
			}
		}
	}
	c.ImageID = ci.Image
	if ci.State != nil {
		c.Running, c.Paused = ci.State.Running, ci.State.Paused
		if !c.Running && ci.State.FinishedAt != "" && !strings.HasPrefix(ci.State.FinishedAt, "0001-") {
			c.Ended = fmt.Sprintf("exit code %d", ci.State.ExitCode)
			if ci.State.OOMKilled {
				c.Ended += ", OOM-killed"
			}
			if ci.State.Error != "" {
				c.Ended += ": " + ci.State.Error
			}
		}
	}
	if c.Running && ci.NetworkSettings != nil {
		c.IP = r.containerIP(ci.NetworkSettings.Networks)
		for _, b := range ci.NetworkSettings.Ports[agentPort()] {
			if b.HostIP.IsLoopback() && b.HostPort != "" {
				c.AgentAddr = net.JoinHostPort(b.HostIP.String(), b.HostPort)
				break
			}
		}
	}
	return c, nil
}

// List returns every container labelled as this server's.
func (r *Runtime) List(ctx context.Context) ([]sandbox.Container, error) {
	filters := client.Filters{}.Add("label", sandbox.LabelManaged+"="+r.cfg.Instance)
	res, err := r.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil {
		return nil, classify(err, "cannot list containers")
	}
	out := make([]sandbox.Container, 0, len(res.Items))
	for _, s := range res.Items {
		c := sandbox.Container{
			ID:        s.ID,
			SandboxID: s.Labels[sandbox.LabelSandbox],
			Labels:    s.Labels,
			ImageID:   s.ImageID,
			Running:   s.State == container.StateRunning || s.State == container.StatePaused,
			Paused:    s.State == container.StatePaused,
		}
		if c.Running && s.NetworkSettings != nil {
			c.IP = r.containerIP(s.NetworkSettings.Networks)
		}
		if c.Running {
			for _, p := range s.Ports {
				if p.PrivatePort == sandbox.AgentPort && p.PublicPort != 0 && p.IP.IsLoopback() {
					c.AgentAddr = net.JoinHostPort(p.IP.String(), strconv.Itoa(int(p.PublicPort)))
					break
				}
			}
		}
		out = append(out, c)
	}
	return out, nil
}
