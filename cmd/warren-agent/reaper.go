package main

import (
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/agent/limitguard"
)

// childEnv marks the agent process that the init started, so that the
// re-executed binary runs the agent instead of another init.
const childEnv = "WARREN_AGENT_CHILD"

// runInit is the container's PID 1: it starts the agent as its child
// (argv, env), forwards stop signals to it and reaps every process that
// ends up orphaned in the container, which the kernel hands to PID 1. An
// agent that ends while no stop was asked for is started again if
// restartable says its settings are kept (restart.go), up to maxRestarts
// in restartWindow; otherwise runInit returns the agent's exit code, and
// the container stops.
//
// It also declares itself a child subreaper, which changes nothing as
// PID 1 and makes the same code work (and testable) anywhere else.
func runInit(log *slog.Logger, argv, env []string, restartable func() bool) int {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		log.Warn("cannot become a child subreaper", "err", err)
	}
	// Subscribe before the agent exists so that neither its exit nor an
	// early stop request can be missed.
	// Forwarded: what Docker sends on stop (SIGTERM) and what a terminal
	// sends on Ctrl-C and friends.
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs, syscall.SIGCHLD,
		syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)

	// Not os/exec: its Wait would race with the reaping below for the
	// agent's exit status.
	start := func(env []string) (int, error) {
		return syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Env: env, Files: []uintptr{0, 1, 2}})
	}
	pid, err := start(env)
	if err != nil {
		log.Error("cannot start the agent", "err", err)
		return 1
	}
	var (
		stopping bool
		restarts []time.Time
	)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			stopping = stopping || sig != syscall.SIGUSR1 && sig != syscall.SIGUSR2
			if err := syscall.Kill(pid, sig.(syscall.Signal)); err != nil && !errors.Is(err, syscall.ESRCH) {
				log.Warn("forwarding signal", "signal", sig, "err", err)
			}
			continue
		}
		status, exited := reap(log, pid)
		if !exited {
			continue
		}
		code := exitCode(status)
		if stopping || !restartable() || !restartAllowed(&restarts, time.Now()) {
			log.Info("agent exited", "code", code)
			return code
		}
		log.Warn("agent ended; starting it again with its kept settings", "code", code)
		again := func() (int, error) { return start(append(slices.Clone(env), restartEnv+"=1")) }
		endBiggest := func() (int, error) { return limitguard.EndBiggestGroup("/proc", []int{syscall.Getpgrp()}) }
		if pid, err = startAgain(log, again, endBiggest, roomForAgent, restartPatience); err != nil {
			log.Error("cannot start the agent again", "err", err)
			return code
		}
	}
	return 1
}

// restartPatience is how long the init tries to start the agent again
// while the sandbox's processes hold its pids.
const restartPatience = 30 * time.Second

// agentTasks is how many pids an agent needs to start and serve: its
// reserved threads and the runtime's own.
const agentTasks = agentThreads + 8

// roomForAgent reports whether the sandbox's pids cgroup has room for an
// agent's tasks (at most half its limit), or no limit.
func roomForAgent() bool {
	tasks, limit := limitguard.Tasks(limitguard.PidsDirs)
	return limit == 0 || tasks+min(agentTasks, limit/2) <= limit
}

// startAgain starts the agent again with start once room says the
// sandbox has pids for it. While the sandbox's processes hold them (a fork
// bomb that outlived the agent, whose guard would have ended it) a start
// fails with EAGAIN, or worse succeeds and the agent dies at once, its
// runtime refused the threads it needs ("failed to create new OS thread",
// exit code 2: five such ends in a row, and the init let the container
// go). So the init first ends the process group holding the most of the
// sandbox's tasks with endBiggest, as the guard does, reaps what that
// leaves, and looks again, for up to patience; then it starts the agent
// whatever room says. Without it an agent killed during a bomb (by the
// OOM killer, or by root inside) could not come back, and the sandbox
// was lost.
func startAgain(log *slog.Logger, start, endBiggest func() (int, error), room func() bool, patience time.Duration) (int, error) {
	deadline := time.Now().Add(patience)
	for {
		late := time.Now().After(deadline)
		if late || room() {
			pid, err := start()
			if !errors.Is(err, syscall.EAGAIN) || late {
				return pid, err
			}
		}
		pgid, err := endBiggest()
		log.Warn("no room to start the agent again: ended the process group holding the most of the sandbox's tasks", "pgid", pgid, "err", err)
		time.Sleep(50 * time.Millisecond)
		reap(log, 0)
	}
}

// reap collects every child that has exited. Signals coalesce, so one
// SIGCHLD may stand for many exits. It reports the agent's status if the
// agent was among them.
func reap(log *slog.Logger, agent int) (unix.WaitStatus, bool) {
	var agentStatus unix.WaitStatus
	found := false
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return agentStatus, found
		}
		if pid == agent {
			agentStatus, found = ws, true
			continue
		}
		log.Debug("reaped orphan", "pid", pid)
	}
}

// exitCode follows the shell's convention: the status, or 128 + the
// signal that killed the process.
func exitCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
