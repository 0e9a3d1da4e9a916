package main

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The init runs in a child test process: it reaps with wait4(-1), which
// would steal the exit statuses of other tests' commands, and it needs to
// be the subreaper the orphans are handed to.
const (
	initHelperEnv = "WARREN_TEST_INIT_SCRIPT"
	// initRestartEnv set makes the helper's agent restartable.
	initRestartEnv = "WARREN_TEST_INIT_RESTARTABLE"
)

func TestInitHelper(t *testing.T) {
	script := os.Getenv(initHelperEnv)
	if script == "" {
		t.Skip("helper for the reaper tests")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	restartable := func() bool { return os.Getenv(initRestartEnv) != "" }
	os.Exit(runInit(log, []string{"/bin/sh", "-c", script}, os.Environ(), restartable))
}

// runInitHelper starts runInit in a child test process with the agent
// replaced by a shell script.
func runInitHelper(t *testing.T, script string, env ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestInitHelper$")
	cmd.Env = append(append(os.Environ(), initHelperEnv+"="+script), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &stderr
}

func exitStatus(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if err == nil {
		return 0
	}
	if !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return ee.ExitCode()
}

// TestInitReapsOrphans: the script orphans a process that then exits.
// Unless the init reaps it, it stays a zombie, /proc/<pid> stays, and the
// script exits 1 instead of 3.
func TestInitReapsOrphans(t *testing.T) {
	script := `p=$( (sleep 0.05 & echo $!) ); sleep 0.5; if [ -e /proc/$p ]; then exit 1; fi; exit 3`
	cmd, stderr := runInitHelper(t, script)
	if got := exitStatus(t, cmd.Wait()); got != 3 {
		t.Errorf("exit code %d, want 3 (the agent's); log:\n%s", got, stderr)
	}
	if !strings.Contains(stderr.String(), "reaped orphan") {
		t.Errorf("no orphan reaped; log:\n%s", stderr)
	}
}

// TestInitForwardsSignals: SIGTERM to the init reaches the agent, whose
// exit code becomes the init's.
func TestInitForwardsSignals(t *testing.T) {
	ready := t.TempDir() + "/ready"
	cmd, stderr := runInitHelper(t, `trap 'exit 7' TERM; touch `+ready+`; while :; do sleep 0.01; done`)
	// The trap must be in place before the signal arrives.
	awaitFile(t, cmd, stderr, ready)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := exitStatus(t, cmd.Wait()); got != 7 {
		t.Errorf("exit code %d, want 7; log:\n%s", got, stderr)
	}
}

// TestInitAgentKilled: an agent killed by a signal is reported as 128+n.
func TestInitAgentKilled(t *testing.T) {
	cmd, stderr := runInitHelper(t, `kill -KILL $$`)
	if got := exitStatus(t, cmd.Wait()); got != 128+9 {
		t.Errorf("exit code %d, want 137; log:\n%s", got, stderr)
	}
}

// awaitFile waits until the helper's agent script has made path.
func awaitFile(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer, path string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the agent script never made %s; log:\n%s", path, stderr)
		}
	}
}

// TestInitRestartsAgent: an agent killed while its settings are kept is
// started again, marked as restarted, and a stop then ends it for good.
func TestInitRestartsAgent(t *testing.T) {
	ready := t.TempDir() + "/ready"
	script := `if [ -z "$` + restartEnv + `" ]; then kill -KILL $$; fi; trap 'exit 7' TERM; touch ` + ready + `; while :; do sleep 0.01; done`
	cmd, stderr := runInitHelper(t, script, initRestartEnv+"=1")
	awaitFile(t, cmd, stderr, ready)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := exitStatus(t, cmd.Wait()); got != 7 {
		t.Errorf("exit code %d, want 7 (the restarted agent's); log:\n%s", got, stderr)
	}
	if !strings.Contains(stderr.String(), "starting it again") {
		t.Errorf("no restart logged; log:\n%s", stderr)
	}
}

// TestInitStopsRestarting: an agent that keeps ending is started again
// maxRestarts times, then its exit ends the init.
func TestInitStopsRestarting(t *testing.T) {
	starts := t.TempDir() + "/starts"
	cmd, stderr := runInitHelper(t, `echo >>`+starts+`; kill -KILL $$`, initRestartEnv+"=1")
	if got := exitStatus(t, cmd.Wait()); got != 128+9 {
		t.Errorf("exit code %d, want 137; log:\n%s", got, stderr)
	}
	b, err := os.ReadFile(starts)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 1+maxRestarts {
		t.Errorf("the agent started %d times, want %d", n, 1+maxRestarts)
	}
}

func TestRestartAllowed(t *testing.T) {
	var restarts []time.Time
	now := time.Now()
	for i := range maxRestarts {
		if !restartAllowed(&restarts, now.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("restart %d refused", i+1)
		}
	}
	if restartAllowed(&restarts, now.Add(maxRestarts*time.Second)) {
		t.Errorf("restart %d within the window allowed", maxRestarts+1)
	}
	if !restartAllowed(&restarts, now.Add(restartWindow+time.Second)) {
		t.Errorf("a restart past the window refused")
	}
}

// TestStartAgainFreesPids: a start refused for want of pids (EAGAIN) ends
// the biggest process group and is tried again; any other failure, or
// refusals past the patience, end the tries.
func TestStartAgainFreesPids(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	roomy := func() bool { return true }
	refusals, ends := 2, 0
	start := func() (int, error) {
		if refusals > 0 {
			refusals--
			return 0, syscall.EAGAIN
		}
		return 42, nil
	}
	endBiggest := func() (int, error) { ends++; return 7, nil }
	if pid, err := startAgain(log, start, endBiggest, roomy, time.Minute); pid != 42 || err != nil || ends != 2 {
		t.Errorf("pid %d, err %v after %d ends; want 42 after 2", pid, err, ends)
	}
	ends = 0
	broken := func() (int, error) { return 0, syscall.ENOENT }
	if _, err := startAgain(log, broken, endBiggest, roomy, time.Minute); !errors.Is(err, syscall.ENOENT) || ends != 0 {
		t.Errorf("err %v after %d ends; want ENOENT at once", err, ends)
	}
	full := func() (int, error) { return 0, syscall.EAGAIN }
	t0 := time.Now()
	if _, err := startAgain(log, full, endBiggest, roomy, 200*time.Millisecond); !errors.Is(err, syscall.EAGAIN) || time.Since(t0) > 5*time.Second || ends == 0 {
		t.Errorf("err %v after %v and %d ends; want EAGAIN after the patience", err, time.Since(t0), ends)
	}
}

// TestStartAgainMakesRoomFirst: a start that the kernel would take while
// the sandbox has too few pids for the agent's threads (which then dies at
// once) waits until ending the biggest group has made room; past the
// patience the agent is started anyway.
func TestStartAgainMakesRoomFirst(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	crowded, ends, starts := 3, 0, 0
	room := func() bool { return crowded == 0 }
	endBiggest := func() (int, error) { ends++; crowded--; return 7, nil }
	start := func() (int, error) { starts++; return 42, nil }
	if pid, err := startAgain(log, start, endBiggest, room, time.Minute); pid != 42 || err != nil || ends != 3 || starts != 1 {
		t.Errorf("pid %d, err %v after %d ends and %d starts; want 42 after 3 ends, one start", pid, err, ends, starts)
	}
	never := func() bool { return false }
	starts, ends = 0, 0
	if pid, err := startAgain(log, start, endBiggest, never, 200*time.Millisecond); pid != 42 || err != nil || starts != 1 || ends == 0 {
		t.Errorf("pid %d, err %v after %d ends and %d starts; want a start once the patience is over", pid, err, ends, starts)
	}
}
