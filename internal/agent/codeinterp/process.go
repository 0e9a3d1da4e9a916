package codeinterp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/warrenhq/warren/internal/agent/oom"
	"github.com/warrenhq/warren/internal/agent/users"
)

// errKernelDied is returned by executions whose kernel process exited.
var errKernelDied = errors.New("kernel process exited")

// identity is who kernels run as: a sandbox user, or nil for the agent's
// own identity (an agent that is not root cannot switch users).
type identity = *users.User

// launch describes a kernel process.
type launch struct {
	argv  []string
	dir   string
	env   []string
	as    identity
	stdin io.Reader
	// stdout and stderr default to the agent's log via the caller; nil
	// discards the output.
	stdout, stderr io.Writer
	extraFiles     []*os.File
}

// process is a running kernel process in its own process group, so that
// interrupts and kills reach whatever it forked.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // exit status; set before done is closed
}

func startProcess(l launch) (*process, error) {
	cmd := exec.Command(l.argv[0], l.argv[1:]...)
	cmd.Dir = l.dir
	cmd.Env = l.env
	cmd.Stdin = l.stdin
	cmd.Stdout = l.stdout
	cmd.Stderr = l.stderr
	cmd.ExtraFiles = l.extraFiles
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A forked child that keeps an output pipe open must not keep Wait,
	// and so the kernel's death, from being noticed.
	cmd.WaitDelay = time.Second
	if l.as != nil && os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: l.as.UID, Gid: l.as.GID, Groups: l.as.Groups}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", l.argv[0], err)
	}
	// Kernels are user code: the OOM killer takes them before the agent.
	// Best effort; a kernel with the agent's score still runs.
	_ = oom.MarkUserProcess(cmd.Process.Pid)
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { // ends when the process does; kill guarantees that
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// signal sends sig to the whole process group.
func (p *process) signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return errKernelDied
	default:
	}
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// kill ends the process group at once (a kernel's state is being thrown
// away, so there is nothing to shut down gracefully) and waits for the
// leader to be reaped.
func (p *process) kill() {
	// Children that outlived the leader still share its group: signal it
	// even when the leader is gone.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// kernelEnv is the environment kernels start with: the agent's own (the
// image's ENV), with the identity variables of the user they run as.
func kernelEnv(as identity, extra ...string) []string {
	skip := map[string]bool{"HOME": true, "USER": true, "LOGNAME": true, "PWD": true}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !skip[name] {
			env = append(env, kv)
		}
	}
	if as != nil && os.Geteuid() == 0 {
		env = append(env, "HOME="+as.Home, "USER="+as.Name, "LOGNAME="+as.Name)
	} else if home, err := os.UserHomeDir(); err == nil {
		env = append(env, "HOME="+home)
	}
	return append(env, extra...)
}
