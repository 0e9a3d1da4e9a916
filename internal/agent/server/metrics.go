package server

import (
	"bufio"
	"bytes"
	"context"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// metrics is the body of GET /metrics. Sizes are bytes except the *_mib
// fields; envd's orchestrator reads these snake_case names.
type metrics struct {
	Timestamp   int64   `json:"ts"`
	CPUCount    int     `json:"cpu_count"`
	CPUUsedPct  float64 `json:"cpu_used_pct"`
	MemTotal    uint64  `json:"mem_total"`
	MemUsed     uint64  `json:"mem_used"`
	MemCache    uint64  `json:"mem_cache"`
	MemTotalMiB uint64  `json:"mem_total_mib"`
	MemUsedMiB  uint64  `json:"mem_used_mib"`
	DiskUsed    uint64  `json:"disk_used"`
	DiskTotal   uint64  `json:"disk_total"`
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	m, err := s.metrics.sample(r.Context())
	if err != nil {
		s.log.Warn("reading metrics", "err", err)
		writeError(w, http.StatusInternalServerError, "failed to read metrics")
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// cpuWindow is how long a first CPU sample waits for a second one: usage
// is a rate, and an agent that has not been asked before has no earlier
// sample to compare with.
const cpuWindow = 100 * time.Millisecond

// metricsSampler reads the container's resource use. A container sees the
// host's /proc/meminfo and CPU count, so limits and usage come from its
// cgroup (v2, else v1), and /proc only fills in what the cgroup lacks.
type metricsSampler struct {
	root string // filesystem root holding proc/ and sys/; "/" in production

	mu   sync.Mutex // serialises samples so CPU deltas are consistent
	prev cpuSample  // guarded by mu; the last CPU reading
}

type cpuSample struct {
	at    time.Time
	usage time.Duration // CPU time consumed by the cgroup (or host) so far
}

func newMetricsSampler(root string) *metricsSampler {
	return &metricsSampler{root: root}
}

func (m *metricsSampler) sample(ctx context.Context) (metrics, error) {
	cg := m.cgroup()
	memTotalHost, meminfo := m.meminfo()
	out := metrics{Timestamp: time.Now().Unix(), CPUCount: cg.cpuCount()}

	pct, err := m.cpuPercent(ctx, cg, out.CPUCount)
	if err != nil {
		return metrics{}, err
	}
	out.CPUUsedPct = pct

	if total, used, cache, ok := cg.memoryUse(memTotalHost); ok {
		out.MemTotal, out.MemUsed, out.MemCache = total, used, cache
	} else {
		out.MemTotal = memTotalHost
		out.MemUsed = sub(memTotalHost, meminfo["MemAvailable"])
		out.MemCache = meminfo["Cached"]
	}
	out.MemTotalMiB = out.MemTotal >> 20
	out.MemUsedMiB = out.MemUsed >> 20

	var fs unix.Statfs_t
	if err := unix.Statfs(m.root, &fs); err != nil {
		return metrics{}, err
	}
	out.DiskTotal = fs.Blocks * uint64(fs.Bsize)
	out.DiskUsed = (fs.Blocks - fs.Bfree) * uint64(fs.Bsize)
	return out, nil
}

// cpuPercent is the cgroup's CPU use since the previous sample, as a share
// of the CPUs it may use.
func (m *metricsSampler) cpuPercent(ctx context.Context, cg cgroup, cpus int) (float64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cpuSample(cg)
	prev := m.prev
	if prev.at.IsZero() || now.at.Sub(prev.at) < cpuWindow/2 {
		prev = now
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(cpuWindow):
		}
		now = m.cpuSample(cg)
	}
	m.prev = now
	wall := now.at.Sub(prev.at)
	if wall <= 0 || cpus <= 0 {
		return 0, nil
	}
	pct := 100 * float64(now.usage-prev.usage) / (float64(wall) * float64(cpus))
	return math.Round(min(max(pct, 0), 100)*100) / 100, nil
}

func (m *metricsSampler) cpuSample(cg cgroup) cpuSample {
	if usage, ok := cg.cpuUsage(); ok {
		return cpuSample{at: time.Now(), usage: usage}
	}
	return cpuSample{at: time.Now(), usage: m.hostCPUUsage()}
}

// hostCPUUsage sums the busy time of every CPU from /proc/stat, for when
// no cgroup accounts for us.
func (m *metricsSampler) hostCPUUsage() time.Duration {
	data, err := os.ReadFile(filepath.Join(m.root, "proc/stat"))
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0
	}
	var ticks uint64
	// user nice system idle iowait irq softirq steal: skip idle and iowait.
	for i, f := range fields[1:9] {
		if i == 3 || i == 4 {
			continue
		}
		n, _ := strconv.ParseUint(f, 10, 64)
		ticks += n
	}
	// USER_HZ is 100 on every Linux architecture Go supports.
	return time.Duration(ticks) * 10 * time.Millisecond
}

// meminfo returns MemTotal and all of /proc/meminfo in bytes.
func (m *metricsSampler) meminfo() (uint64, map[string]uint64) {
	info := map[string]uint64{}
	f, err := os.Open(filepath.Join(m.root, "proc/meminfo"))
	if err != nil {
		return 0, info
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) > 1 && fields[1] == "kB" {
			n <<= 10
		}
		info[key] = n
	}
	return info["MemTotal"], info
}

// cgroup is the agent's own cgroup: the container's, since the agent is
// its entrypoint. Directories that could not be found are "".
type cgroup struct {
	v2      string // unified hierarchy directory
	mem     string // v1 memory controller directory
	cpu     string // v1 cpu controller directory (quota)
	cpuacct string // v1 cpuacct controller directory (usage); often the same
}

// cgroup finds the agent's cgroup directories. With a private cgroup
// namespace (Docker's default on v2) /proc/self/cgroup says "/"; with the
// host's it names a path that Docker does not mount, so each controller is
// tried at the path and then at the mount point itself.
func (m *metricsSampler) cgroup() cgroup {
	base := filepath.Join(m.root, "sys/fs/cgroup")
	data, _ := os.ReadFile(filepath.Join(m.root, "proc/self/cgroup"))
	paths := map[string]string{}
	for line := range strings.SplitSeq(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			paths[""] = parts[2]
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			paths[c] = parts[2]
		}
	}
	find := func(dir, rel, probe string) string {
		for _, d := range []string{filepath.Join(dir, rel), dir} {
			if _, err := os.Stat(filepath.Join(d, probe)); err == nil {
				return d
			}
		}
		return ""
	}
	var cg cgroup
	if _, err := os.Stat(filepath.Join(base, "cgroup.controllers")); err == nil {
		cg.v2 = find(base, paths[""], "cgroup.controllers")
		return cg
	}
	cg.mem = find(filepath.Join(base, "memory"), paths["memory"], "memory.usage_in_bytes")
	// The two CPU controllers are mounted together or apart, depending on
	// the distribution.
	for _, name := range []string{"cpu", "cpu,cpuacct"} {
		if cg.cpu = find(filepath.Join(base, name), paths["cpu"], "cpu.cfs_period_us"); cg.cpu != "" {
			break
		}
	}
	for _, name := range []string{"cpuacct", "cpu,cpuacct", "cpu"} {
		if cg.cpuacct = find(filepath.Join(base, name), paths["cpuacct"], "cpuacct.usage"); cg.cpuacct != "" {
			break
		}
	}
	return cg
}

// cpuCount is the number of CPUs the cgroup's quota allows, rounded up,
// and never more than the machine (or cpuset) offers.
func (cg cgroup) cpuCount() int {
	n := runtime.NumCPU()
	var quota, period float64
	switch {
	case cg.v2 != "":
		fields := strings.Fields(readString(filepath.Join(cg.v2, "cpu.max")))
		if len(fields) != 2 || fields[0] == "max" {
			return n
		}
		quota, _ = strconv.ParseFloat(fields[0], 64)
		period, _ = strconv.ParseFloat(fields[1], 64)
	case cg.cpu != "":
		quota, _ = strconv.ParseFloat(readString(filepath.Join(cg.cpu, "cpu.cfs_quota_us")), 64)
		period, _ = strconv.ParseFloat(readString(filepath.Join(cg.cpu, "cpu.cfs_period_us")), 64)
	}
	if quota <= 0 || period <= 0 {
		return n
	}
	return min(n, max(1, int(math.Ceil(quota/period))))
}

func (cg cgroup) cpuUsage() (time.Duration, bool) {
	switch {
	case cg.v2 != "":
		stat := readKeyed(filepath.Join(cg.v2, "cpu.stat"))
		usec, ok := stat["usage_usec"]
		return time.Duration(usec) * time.Microsecond, ok
	case cg.cpuacct != "":
		ns, err := strconv.ParseUint(readString(filepath.Join(cg.cpuacct, "cpuacct.usage")), 10, 64)
		return time.Duration(ns), err == nil
	}
	return 0, false
}

// memory returns the cgroup's limit (capped at the host's memory), its
// use without reclaimable page cache (what `docker stats` shows), and its
// page cache.
func (cg cgroup) memoryUse(hostTotal uint64) (total, used, cache uint64, ok bool) {
	var usage, limit uint64
	var stat map[string]uint64
	var inactive uint64
	switch {
	case cg.v2 != "":
		var err error
		if usage, err = strconv.ParseUint(readString(filepath.Join(cg.v2, "memory.current")), 10, 64); err != nil {
			return 0, 0, 0, false
		}
		limit, _ = strconv.ParseUint(readString(filepath.Join(cg.v2, "memory.max")), 10, 64) // "max" ⇒ 0
		stat = readKeyed(filepath.Join(cg.v2, "memory.stat"))
		cache, inactive = stat["file"], stat["inactive_file"]
	case cg.mem != "":
		var err error
		if usage, err = strconv.ParseUint(readString(filepath.Join(cg.mem, "memory.usage_in_bytes")), 10, 64); err != nil {
			return 0, 0, 0, false
		}
		limit, _ = strconv.ParseUint(readString(filepath.Join(cg.mem, "memory.limit_in_bytes")), 10, 64)
		stat = readKeyed(filepath.Join(cg.mem, "memory.stat"))
		cache, inactive = stat["total_cache"], stat["total_inactive_file"]
		if _, hier := stat["total_cache"]; !hier {
			cache, inactive = stat["cache"], stat["inactive_file"]
		}
	default:
		return 0, 0, 0, false
	}
	total = hostTotal
	// v1 reports "no limit" as a huge number; either way the host caps it.
	if limit > 0 && (hostTotal == 0 || limit < hostTotal) {
		total = limit
	}
	return total, sub(usage, inactive), cache, true
}

func readString(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// readKeyed parses "key value" lines such as cpu.stat and memory.stat.
func readKeyed(path string) map[string]uint64 {
	out := map[string]uint64{}
	for line := range strings.SplitSeq(readString(path), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}

func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
