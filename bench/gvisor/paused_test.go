package main

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

func TestParseMemoryCgroup(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"v1 hybrid", "5:devices:/warren-gvisor/abc\n4:memory:/process_api/x/warren-gvisor/abc\n0::/\n",
			"/sys/fs/cgroup/memory/process_api/x/warren-gvisor/abc/memory.usage_in_bytes"},
		{"v1 joined controllers", "3:memory,hugetlb:/docker/abc\n", "/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes"},
		{"v2", "0::/system.slice/docker-abc.scope\n", "/sys/fs/cgroup/system.slice/docker-abc.scope/memory.current"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMemoryCgroup(tc.in)
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if got, err := parseMemoryCgroup("1:cpu:/docker/abc\n"); err == nil {
		t.Errorf("without a memory cgroup: %q, nil; want an error", got)
	}
}

func TestParseMemAvailable(t *testing.T) {
	got, err := parseMemAvailable(strings.NewReader("MemTotal:       24683652 kB\nMemFree:        21568404 kB\nMemAvailable:   23963200 kB\n"))
	if err != nil || got != 23963200<<10 {
		t.Errorf("got %d, %v; want %d", got, err, 23963200<<10)
	}
	if _, err := parseMemAvailable(strings.NewReader("MemTotal: 1 kB\n")); err == nil {
		t.Error("without MemAvailable: no error")
	}
}

func TestParsePerCPUPages(t *testing.T) {
	zoneinfo := `Node 0, zone   Normal
  pages free     2553577
        min      13278
  pagesets
    cpu: 0
              count: 120
              high:  2249
    cpu: 1
              count: 30
              high:  2249
  node_unreclaimable:  0
Node 0, zone    DMA32
  pagesets
    cpu: 0
              count: 2
`
	got, err := parsePerCPUPages(strings.NewReader(zoneinfo))
	if err != nil || got != 152 {
		t.Errorf("got %d, %v; want 152", got, err)
	}
	if _, err := parsePerCPUPages(strings.NewReader("Node 0, zone DMA\n")); err == nil {
		t.Error("without pagesets: no error")
	}
}

func TestMemDrop(t *testing.T) {
	base := hostMem{available: 10 << 30, perCPU: 50 << 20}
	now := hostMem{available: 9 << 30, perCPU: 850 << 20}
	raw, net := memDrop(base, now)
	if raw != 1<<30 || net != 224<<20 {
		t.Errorf("memDrop = %d, %d; want %d, %d", raw, net, 1<<30, 224<<20)
	}
}

func TestEach(t *testing.T) {
	var running, most, calls atomic.Int32
	err := each(20, 3, func(i int) error {
		calls.Add(1)
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		defer running.Add(-1)
		if i == 7 {
			return errTest
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), errTest.Error()) {
		t.Errorf("each = %v; want the error of call 7", err)
	}
	if calls.Load() != 20 || most.Load() > 3 {
		t.Errorf("%d calls, at most %d at once; want 20, at most 3", calls.Load(), most.Load())
	}
}

var errTest = errors.New("call 7 failed")

func TestSelectModes(t *testing.T) {
	for _, tc := range []struct {
		name, list string
		want       []string
		err        bool
	}{
		{"all", "all", []string{"runc-frozen", "runc-stopped", "gvisor-frozen", "gvisor-checkpointed"}, false},
		{"empty", "", []string{"runc-frozen", "runc-stopped", "gvisor-frozen", "gvisor-checkpointed"}, false},
		{"two in pauseModes order", "gvisor-checkpointed, runc-frozen", []string{"runc-frozen", "gvisor-checkpointed"}, false},
		{"unknown", "runc-frozen,gvisor-stopped", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			modes, err := selectModes(tc.list)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			var got []string
			for _, m := range modes {
				got = append(got, m.name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
