package main

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The agent trims idleTrimAfter after its start or its last request began,
// never while requests keep coming, then every idleTrimEvery while idle.
func TestIdleTrimmer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var trims atomic.Int32
		it := newIdleTrimmer(func() { trims.Add(1) })
		defer it.stop()
		step := func(d time.Duration, want int32, why string) {
			t.Helper()
			time.Sleep(d)
			synctest.Wait()
			if got := trims.Load(); got != want {
				t.Fatalf("%s: %d trims, want %d", why, got, want)
			}
		}
		step(idleTrimAfter-time.Millisecond, 0, "before the first idle period ends")
		step(time.Millisecond, 1, "idle since the start")
		for range 10 { // a request every second
			it.busy()
			step(time.Second, 1, "while requests come")
		}
		step(idleTrimAfter-time.Second, 2, "idle after the last request")
		step(idleTrimEvery-time.Millisecond, 2, "before the next idle trim")
		step(time.Millisecond, 3, "still idle")
	})
}
