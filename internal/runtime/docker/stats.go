package docker

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

// statsSample is what Stats remembers of a container between calls: a
// one-shot sample carries no previous CPU reading, so the CPU percentage is
// computed against the caller's previous call.
type statsSample struct {
	at       time.Time
	cpuNanos uint64  // cumulative CPU time of the container
	cpus     float64 // CPUs the container may use (its limit, else the host's)
	disk     int64   // bytes the engine lets the writable layer hold; 0 = no limit
}

// Stats takes one sample of a container's resource use. CPUUsedPct is the
// share of the container's CPUs used since the previous Stats call for the
// same container (0 on the first call); memory figures are bytes, with the
// page cache excluded from MemUsed as `docker stats` does.
//
// DiskTotal is the size the engine enforces on the container's writable
// layer, 0 when it enforces none, and DiskUsed is left 0: the engine
// measures a container's disk only by walking its layer, far too slowly to
// sample. The sandbox's agent reports the filesystem it sees instead.
func (r *Runtime) Stats(ctx context.Context, id string) (sandbox.Stats, error) {
	prev, known := r.sample(id)
	if !known {
		lim, err := r.limits(ctx, id)
		if err != nil {
			return sandbox.Stats{}, err
		}
		prev.cpus, prev.disk = lim.cpus, lim.disk
	}
	res, err := r.cli.ContainerStats(ctx, id, client.ContainerStatsOptions{})
	if err != nil {
		return sandbox.Stats{}, classify(err, "cannot read the sandbox's stats")
	}
	defer res.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		return sandbox.Stats{}, classify(err, "cannot read the sandbox's stats")
	}

	if prev.cpus == 0 {
		prev.cpus = float64(max(1, s.CPUStats.OnlineCPUs))
	}
	now := s.Read
	if now.IsZero() {
		now = time.Now()
	}
	out := sandbox.Stats{
		Time:      now,
		CPUCount:  max(1, int(prev.cpus+0.5)),
		MemTotal:  int64(s.MemoryStats.Limit),
		DiskTotal: prev.disk,
	}
	cpuNanos := s.CPUStats.CPUUsage.TotalUsage
	if known && now.After(prev.at) && cpuNanos >= prev.cpuNanos {
		wall := float64(now.Sub(prev.at).Nanoseconds())
		out.CPUUsedPct = min(100, float64(cpuNanos-prev.cpuNanos)/(wall*prev.cpus)*100)
	}
	out.MemUsed, out.MemCache = memoryUse(s.MemoryStats)
	r.remember(id, statsSample{at: now, cpuNanos: cpuNanos, cpus: prev.cpus, disk: prev.disk})
	return out, nil
}

// memoryUse returns used memory without reclaimable cache, and the page
// cache, for cgroup v1 and v2 alike.
func memoryUse(m container.MemoryStats) (used, cache int64) {
	used = int64(m.Usage)
	inactive, ok := m.Stats["total_inactive_file"] // cgroup v1
	if !ok {
		inactive = m.Stats["inactive_file"] // cgroup v2
	}
	if inactive < m.Usage {
		used -= int64(inactive)
	}
	c, ok := m.Stats["cache"] // cgroup v1
	if !ok {
		c = m.Stats["file"] // cgroup v2
	}
	return used, int64(c)
}

// limits are a container's CPU and disk limits; zero means none.
type limits struct {
	cpus float64
	disk int64 // bytes
}

// limits returns a container's CPU limit and the size of its writable
// layer, as Create set them.
func (r *Runtime) limits(ctx context.Context, id string) (limits, error) {
	res, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return limits{}, classify(err, "cannot inspect the sandbox's container")
	}
	var l limits
	if h := res.Container.HostConfig; h != nil {
		if h.NanoCPUs > 0 {
			l.cpus = float64(h.NanoCPUs) / 1e9
		}
		l.disk = storageSize(h.StorageOpt["size"])
	}
	return l, nil
}

// storageSize reads the storage option size as Create writes it ("10240M"),
// 0 when absent or written otherwise.
func storageSize(v string) int64 {
	n, err := strconv.ParseInt(strings.TrimSuffix(v, "M"), 10, 64)
	if err != nil || n <= 0 || !strings.HasSuffix(v, "M") {
		return 0
	}
	return n << 20
}

func (r *Runtime) sample(id string) (statsSample, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.samples[id]
	return s, ok
}

func (r *Runtime) remember(id string, s statsSample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples[id] = s
}

func (r *Runtime) forgetSample(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.samples, id)
}
