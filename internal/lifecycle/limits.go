package lifecycle

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
)

// MachineMemoryShare is the share of the machine's memory that is the
// default maximum of one sandbox (Settings.MaxMemoryMB): one sandbox may
// take half of it, no more.
const MachineMemoryShare = 0.5

// memoryStep is what DefaultMaxMemoryMB rounds down to a multiple of, and
// the least it returns: the least memory a template may ask for.
const memoryStep = 128

// DefaultMaxMemoryMB returns MachineMemoryShare of the machine's memory
// (MemTotal in /proc/meminfo) in MiB, rounded down to a multiple of 128
// MiB and at least 128; fallback when the machine cannot tell.
func DefaultMaxMemoryMB(fallback int) int {
	kb, ok := memTotalKB("/proc/meminfo")
	if !ok {
		return fallback
	}
	mb := int(float64(kb)/1024*MachineMemoryShare) / memoryStep * memoryStep
	return max(mb, memoryStep)
}

// DefaultServerMemoryMB returns the machine's memory (MemTotal) in MiB,
// what its sandboxes may reserve in all (Settings.ServerMemoryMB); 0 (no
// limit) when the machine cannot tell.
func DefaultServerMemoryMB() int {
	kb, ok := memTotalKB("/proc/meminfo")
	if !ok {
		return 0
	}
	return int(kb / 1024)
}

// memTotalKB reads MemTotal, in KiB, from a meminfo file.
func memTotalKB(path string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		return kb, err == nil && kb > 0
	}
	return 0, false
}

// CheckResources refuses resources a client asks for (a template's CPUs
// and memory) above the server's maxima, naming the limit. 0 = not asked.
func (m *Manager) CheckResources(cpuCount, memoryMB int) error {
	if cpuCount > m.cfg.MaxCPUCount {
		return sandbox.Errorf(sandbox.KindInvalid, "cpuCount %d is above this server's maximum of %d CPUs per sandbox (--max-cpu-count)", cpuCount, m.cfg.MaxCPUCount)
	}
	if memoryMB > m.cfg.MaxMemoryMB {
		return sandbox.Errorf(sandbox.KindInvalid, "memoryMB %d is above this server's maximum of %d MiB per sandbox (--max-memory-mb)", memoryMB, m.cfg.MaxMemoryMB)
	}
	return nil
}
