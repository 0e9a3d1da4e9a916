package main

import (
	"runtime"
	"sync"
)

// Threads set aside at start. The pids limit of a sandbox counts threads,
// and a fork bomb takes every pid left; a Go program that then needs one
// more OS thread (a goroutine blocked in a system call, a locked thread)
// dies with "failed to create new OS thread". Go keeps idle threads for
// reuse and never ends them, so threads made at start serve later demand
// without asking the kernel for more. Each thread is also a pid of the
// host's, whose kernel.pid_max (32768 by default) every container's
// threads share: 64 of them made 500 idle sandboxes need ~48,000 pids
// with their shims and proxies (bench/idle). 16 hold the runtime's own
// (a P's thread per CPU of the sandbox, sysmon) and a dozen blocking
// calls at once: waits on processes, file work as users.
const (
	agentThreads = 16 // serving requests, waits on processes, file work as users
	initThreads  = 4  // the init only waits for signals and reaps
)

// reserveThreads makes the runtime start n OS threads, which then stay
// idle in its pool: each of n goroutines locks a thread of its own until
// all n are locked, then they let go together.
func reserveThreads(n int) {
	var locked, release sync.WaitGroup
	locked.Add(n)
	release.Add(1)
	for range n {
		go func() {
			runtime.LockOSThread()
			locked.Done()
			release.Wait()
			runtime.UnlockOSThread()
		}()
	}
	locked.Wait()
	release.Done()
}
