package main

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// TestReserveThreadsKeepsThem: the threads stay after the goroutines that
// made them are gone, ready for later demand.
func TestReserveThreadsKeepsThem(t *testing.T) {
	const n = 48
	if threadCount(t) >= n {
		t.Skip("this test process has that many threads already")
	}
	reserveThreads(n)
	runtime.GC()
	time.Sleep(100 * time.Millisecond)
	// Idle threads the runtime had are among the n; all stay.
	if got := threadCount(t); got < n {
		t.Fatalf("%d threads after reserving %d", got, n)
	}
}

func threadCount(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skipf("no /proc/self/task: %v", err)
	}
	return len(entries)
}
