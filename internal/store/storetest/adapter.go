package storetest

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// What the adapters' own tests share: opening a store for a test, and
// watching their group commits (internal/store/sqlstore's queue).

// Open returns the store open returns, closed when tb ends; its error
// fails tb.
func Open[S interface{ Close() error }](tb testing.TB, open func() (S, error)) S {
	tb.Helper()
	s, err := open()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// WaitQueued waits until n goroutines wait to hand a write to a busy
// writer, or fails tb after 10 s.
func WaitQueued(tb testing.TB, n int) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		waiting := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			header, _, _ := strings.Cut(g, "\n")
			if strings.Contains(header, "[select") && strings.Contains(g, "sqlstore.Submit[") {
				waiting++
			}
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d writes wait for a writer after 10 s, want %d", waiting, n)
		}
		runtime.Gosched()
	}
}

// WantLogLines checks how many log lines each sandbox of want has.
func WantLogLines(tb testing.TB, s Store, want map[string]int) {
	tb.Helper()
	for id, n := range want {
		logs, err := s.Logs(tb.Context(), id, sandbox.LogQuery{})
		if err != nil {
			tb.Fatal(err)
		}
		if len(logs) != n {
			tb.Errorf("sandbox %s has %d log lines, want %d", id, len(logs), n)
		}
	}
}

// WantWrites checks how the writes of a batch went: cancelled, a write
// whose context ended before its turn, was not run, and each of errs
// failed or not as ok says.
func WantWrites(tb testing.TB, cancelled error, errs map[string]error, ok map[string]bool) {
	tb.Helper()
	if !errors.Is(cancelled, context.Canceled) {
		tb.Errorf("a write cancelled before its turn returned %v, want context.Canceled", cancelled)
	}
	for name, want := range ok {
		if got := errs[name] == nil; got != want {
			tb.Errorf("write %s: error %v", name, errs[name])
		}
	}
}
