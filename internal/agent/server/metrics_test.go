package server

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeTree creates files under root from a path → content map.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const meminfo = "MemTotal:       16384000 kB\nMemFree:         1000000 kB\nMemAvailable:    8192000 kB\nCached:          2048000 kB\n"

func TestMetricsSources(t *testing.T) {
	gib := uint64(1 << 30)
	tests := []struct {
		name  string
		files map[string]string
		want  metrics // Timestamp, CPUUsedPct and disk are not compared
	}{
		{
			name: "cgroup v2 with limits",
			files: map[string]string{
				"proc/meminfo":                     meminfo,
				"proc/self/cgroup":                 "0::/\n",
				"sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n",
				"sys/fs/cgroup/cpu.max":            "100000 100000\n",
				"sys/fs/cgroup/cpu.stat":           "usage_usec 5000\nuser_usec 4000\n",
				"sys/fs/cgroup/memory.current":     "1073741824\n",
				"sys/fs/cgroup/memory.max":         "2147483648\n",
				"sys/fs/cgroup/memory.stat":        "anon 1\nfile 536870912\ninactive_file 268435456\n",
			},
			want: metrics{CPUCount: 1, MemTotal: 2 * gib, MemUsed: gib - gib/4, MemCache: gib / 2, MemTotalMiB: 2048, MemUsedMiB: 768},
		},
		{
			name: "cgroup v2 without memory limit, host cgroup namespace",
			files: map[string]string{
				"proc/meminfo":                     meminfo,
				"proc/self/cgroup":                 "0::/system.slice/docker-abc.scope\n",
				"sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
				"sys/fs/cgroup/cpu.max":            "max 100000\n",
				"sys/fs/cgroup/cpu.stat":           "usage_usec 1\n",
				"sys/fs/cgroup/memory.current":     "1048576\n",
				"sys/fs/cgroup/memory.max":         "max\n",
				"sys/fs/cgroup/memory.stat":        "file 0\ninactive_file 0\n",
			},
			want: metrics{CPUCount: runtime.NumCPU(), MemTotal: 16384000 << 10, MemUsed: 1 << 20, MemTotalMiB: 16000, MemUsedMiB: 1},
		},
		{
			name: "cgroup v1 at a nested path",
			files: map[string]string{
				"proc/meminfo":     meminfo,
				"proc/self/cgroup": "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n",
				"sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes":  "3221225472\n",
				"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes":  "9223372036854771712\n",
				"sys/fs/cgroup/memory/docker/abc/memory.stat":            "cache 10\ntotal_cache 1073741824\ntotal_inactive_file 1073741824\n",
				"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpuacct.usage":     "123456789\n",
				"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us":  "50000\n",
				"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
			},
			want: metrics{CPUCount: 1, MemTotal: 16384000 << 10, MemUsed: 2 * gib, MemCache: gib, MemTotalMiB: 16000, MemUsedMiB: 2048},
		},
		{
			name: "cgroup v1, cpu and cpuacct mounted apart, private namespace",
			files: map[string]string{
				"proc/meminfo":     meminfo,
				"proc/self/cgroup": "4:memory:/\n2:cpuacct:/\n1:cpu:/\n",
				"sys/fs/cgroup/memory/memory.usage_in_bytes": "1048576\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912\n",
				"sys/fs/cgroup/memory/memory.stat":           "cache 4096\ninactive_file 0\n",
				"sys/fs/cgroup/cpuacct/cpuacct.usage":        "1\n",
				"sys/fs/cgroup/cpu/cpu.cfs_quota_us":         "100000\n",
				"sys/fs/cgroup/cpu/cpu.cfs_period_us":        "100000\n",
			},
			want: metrics{CPUCount: 1, MemTotal: 512 << 20, MemUsed: 1 << 20, MemCache: 4096, MemTotalMiB: 512, MemUsedMiB: 1},
		},
		{
			name: "no cgroup: /proc only",
			files: map[string]string{
				"proc/meminfo": meminfo,
				"proc/stat":    "cpu  100 0 100 800 0 0 0 0 0 0\n",
			},
			want: metrics{CPUCount: runtime.NumCPU(), MemTotal: 16384000 << 10, MemUsed: 8192000 << 10, MemCache: 2048000 << 10, MemTotalMiB: 16000, MemUsedMiB: 8000},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, tt.files)
			got, err := newMetricsSampler(root).sample(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got.DiskTotal == 0 || got.DiskUsed > got.DiskTotal {
				t.Errorf("disk %d of %d", got.DiskUsed, got.DiskTotal)
			}
			got.Timestamp, got.CPUUsedPct, got.DiskTotal, got.DiskUsed = 0, 0, 0, 0
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("sample (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCPUPercent checks the rate arithmetic: 50 ms of CPU time over at
// least cpuWindow on 1 CPU.
func TestCPUPercent(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"sys/fs/cgroup/cgroup.controllers": "cpu\n",
		"sys/fs/cgroup/cpu.max":            "100000 100000\n",
		"sys/fs/cgroup/cpu.stat":           "usage_usec 1000000\n",
	})
	m := newMetricsSampler(root)
	cg := m.cgroup()
	pct, err := m.cpuPercent(context.Background(), cg, 1)
	if err != nil || pct != 0 {
		t.Fatalf("idle cgroup: %v %v", pct, err)
	}
	writeTree(t, root, map[string]string{"sys/fs/cgroup/cpu.stat": "usage_usec 1050000\n"})
	m.prev.at = m.prev.at.Add(-cpuWindow) // as if the last sample were older
	pct, err = m.cpuPercent(context.Background(), cg, 1)
	if err != nil || pct <= 0 || pct > 50 {
		t.Errorf("busy cgroup: %v %v, want (0, 50]", pct, err)
	}
}
