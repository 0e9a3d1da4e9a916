package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Host-side memory readings of the paused-RAM measurement: the
// containers' memory cgroups, and the host's MemAvailable corrected for
// free pages parked on per-CPU lists.

// memoryCgroup returns the file holding the memory use of process pid's
// cgroup: memory.usage_in_bytes of its cgroup v1 memory controller when it
// has one, else memory.current of its cgroup v2 group.
func memoryCgroup(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	file, err := parseMemoryCgroup(string(data))
	if err != nil {
		return "", fmt.Errorf("process %d: %w", pid, err)
	}
	if _, err := os.Stat(file); err != nil {
		return "", fmt.Errorf("process %d's memory cgroup: %w", pid, err)
	}
	return file, nil
}

// parseMemoryCgroup picks the memory use file out of /proc/PID/cgroup's
// lines ("ID:controllers:path"), assuming cgroupfs under /sys/fs/cgroup.
func parseMemoryCgroup(procCgroup string) (string, error) {
	var unified string
	for line := range strings.Lines(procCgroup) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			if c == "memory" {
				return filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.usage_in_bytes"), nil
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			unified = parts[2]
		}
	}
	if unified == "" {
		return "", errors.New("no memory cgroup")
	}
	return filepath.Join("/sys/fs/cgroup", unified, "memory.current"), nil
}

// cgroupsUsage adds up the memory use in the given cgroup files and counts
// those that still exist: a cgroup that is gone holds nothing.
func cgroupsUsage(files []string) (total int64, exist int, err error) {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", f, err)
		}
		total += n
		exist++
	}
	return total, exist, nil
}

// hostMem is one reading of the host's memory, in bytes.
type hostMem struct {
	available int64 // /proc/meminfo MemAvailable
	// perCPU is the free pages on the per-CPU lists (/proc/zoneinfo's
	// pagesets). The kernel counts them neither free nor available; after
	// a burst of frees (runsc sandboxes exiting) they hold up to ~1 GiB
	// here and drain over a minute or two.
	perCPU int64
}

func readHostMem() (hostMem, error) {
	var h hostMem
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return h, err
	}
	defer f.Close()
	if h.available, err = parseMemAvailable(f); err != nil {
		return h, err
	}
	z, err := os.Open("/proc/zoneinfo")
	if err != nil {
		return h, err
	}
	defer z.Close()
	pages, err := parsePerCPUPages(z)
	h.perCPU = pages * int64(os.Getpagesize())
	return h, err
}

// settleHostMem waits settle, then while the per-CPU lists hold more than
// slack above base's, for at most limit; it returns the last reading and
// how long it waited.
func settleHostMem(base hostMem) (hostMem, time.Duration, error) {
	const (
		settle = 3 * time.Second
		slack  = 64 << 20
		limit  = 2 * time.Minute
	)
	start := time.Now()
	time.Sleep(settle)
	for {
		h, err := readHostMem()
		if err != nil || h.perCPU <= base.perCPU+slack || time.Since(start) > limit {
			return h, time.Since(start), err
		}
		time.Sleep(2 * time.Second)
	}
}

// memDrop is how much memory the host lost between base and now, by
// MemAvailable, and the same without the change in per-CPU free pages.
func memDrop(base, now hostMem) (raw, net int64) {
	raw = base.available - now.available
	return raw, raw - (now.perCPU - base.perCPU)
}

func parseMemAvailable(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.Join(sc.Err(), errors.New("no MemAvailable in /proc/meminfo"))
}

// parsePerCPUPages adds up the "count:" lines of /proc/zoneinfo: the pages
// on each zone's per-CPU free lists.
func parsePerCPUPages(r io.Reader) (int64, error) {
	var n int64
	var found bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "count:"); ok {
			c, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/zoneinfo: %w", err)
			}
			n += c
			found = true
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, errors.New("no per-CPU page counts in /proc/zoneinfo")
	}
	return n, nil
}

func loadAverage() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
