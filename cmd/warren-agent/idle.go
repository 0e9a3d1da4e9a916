package main

import (
	"runtime/debug"
	"sync"
	"time"
)

// Most sandboxes sit idle most of their life, and a thousand of them share
// one host (bench/idle), so what an idle agent holds is multiplied. Go's
// collector does not run before the heap reaches 4 MiB (but for its forced
// collection every 2 minutes), and its scavenger keeps the free pages of a
// heap under that goal: the garbage of start-up and of the first requests
// stayed resident, and an idle agent kept growing (its anonymous memory
// 2.0 MiB at 5 s, 2.6 at 35 s, 5.9 after ten minutes). The agent collects
// and hands the free pages back to the kernel once it has been idle for
// idleTrimAfter, and again every idleTrimEvery while it stays idle: the
// limit guard's checks still allocate their paths, ~44 KB a minute. A trim
// is a forced collection of a heap under 1 MiB, ~0.5 ms of CPU; a request
// waits at most for its stop-the-world pauses (~0.2 ms).
const (
	idleTrimAfter = 5 * time.Second
	idleTrimEvery = time.Minute
)

// idleTrimmer calls free when the agent idles: debug.FreeOSMemory, or a
// test's recorder.
type idleTrimmer struct {
	free func()

	mu    sync.Mutex
	t     *time.Timer
	begun uint64 // guarded by mu; busy calls so far
}

// newIdleTrimmer starts the first idle period now.
func newIdleTrimmer(free func()) *idleTrimmer {
	it := &idleTrimmer{free: free}
	it.mu.Lock()
	it.t = time.AfterFunc(idleTrimAfter, it.trim)
	it.mu.Unlock()
	return it
}

// busy starts a new idle period: called as each request starts.
func (it *idleTrimmer) busy() {
	it.mu.Lock()
	it.begun++
	it.t.Reset(idleTrimAfter)
	it.mu.Unlock()
}

func (it *idleTrimmer) trim() {
	it.mu.Lock()
	begun := it.begun
	it.mu.Unlock()
	it.free()
	it.mu.Lock()
	if it.begun == begun { // else a request came meanwhile and set the timer
		it.t.Reset(idleTrimEvery)
	}
	it.mu.Unlock()
}

// stop ends the trims.
func (it *idleTrimmer) stop() {
	it.mu.Lock()
	it.t.Stop()
	it.mu.Unlock()
}

// freeOSMemory is the agent's free.
func freeOSMemory() { debug.FreeOSMemory() }
