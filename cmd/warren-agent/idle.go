package main

import (
	"runtime/debug"
	"sync"
	"time"
)

// Most sandboxes sit idle most of their life, and a thousand of them share
// one host (bench/idle), so what an idle agent holds is multiplied. Go's
// collector does not run before the heap reaches 4 MiB, and its scavenger
// keeps the pages of a heap that size: the garbage of start-up and of the
// first requests stayed resident, and an idle agent's heap kept growing
// (~0.7 MiB in its first minute). The agent collects and hands the free
// pages back to the kernel once it has been idle for idleTrimAfter, and
// again every idleTrimEvery while it stays idle: the limit guard's checks
// still allocate a little (their paths), ~0.1 MiB a minute of resident
// heap without the trims. A request never waits for a trim; one costs ~1
// ms of CPU.
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
