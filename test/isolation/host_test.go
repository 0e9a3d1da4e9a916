package isolation

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// What the host sees of a sandbox: the engine runs on this host (the
// tests need its iptables), so its containers' processes are in our /proc.

// hostProcess returns the host PID of a container's first process (the
// agent under runc, runsc's sandbox process, the Sentry, under gVisor)
// and the fields of its /proc status, with "cmdline" added.
func (e *env) hostProcess(t *testing.T, containerID string) (int, map[string]string) {
	t.Helper()
	c, err := e.cli.ContainerInspect(t.Context(), containerID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pid := c.Container.State.Pid
	if pid == 0 {
		t.Fatalf("container %s has no process (running %v)", containerID, c.Container.State.Running)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("the sandbox's host process: %v", err)
	}
	fields := map[string]string{}
	for l := range strings.Lines(string(status)) {
		if k, v, ok := strings.Cut(l, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	fields["cmdline"] = string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
	return pid, fields
}

// pidsRefusals returns how many forks the pids limit of a container's
// cgroup refused (the "max" count of its pids.events), and what it read;
// -1 when it cannot tell, saying why.
func (e *env) pidsRefusals(t *testing.T, containerID string) (int, string) {
	t.Helper()
	c, err := e.cli.ContainerInspect(t.Context(), containerID, client.ContainerInspectOptions{})
	if err != nil || c.Container.State.Pid == 0 {
		return -1, fmt.Sprintf("pids.events unread: the container has no process (%v)", err)
	}
	cgroups, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.Container.State.Pid))
	if err != nil {
		return -1, fmt.Sprintf("pids.events unread: %v", err)
	}
	// cgroup v1 names the pids hierarchy; v2 has one, "0::".
	var paths []string
	for l := range strings.Lines(string(cgroups)) {
		f := strings.SplitN(strings.TrimSpace(l), ":", 3)
		switch {
		case len(f) < 3:
		case f[1] == "pids":
			paths = append(paths, filepath.Join("/sys/fs/cgroup/pids", f[2], "pids.events"))
		case f[0] == "0" && f[1] == "":
			paths = append(paths, filepath.Join("/sys/fs/cgroup", f[2], "pids.events"))
		}
	}
	for _, p := range paths {
		events, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for l := range strings.Lines(string(events)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "max "); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					break
				}
				return n, fmt.Sprintf("%s: max %d", p, n)
			}
		}
	}
	return -1, fmt.Sprintf("pids.events unread: none of %v has a max count", paths)
}

// stopped returns a container's state once it no longer runs, or after
// 30 seconds: the engine learns of a gVisor Sentry's death a moment after
// the execs in it end.
func (e *env) stopped(t *testing.T, containerID string) *container.State {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := e.cli.ContainerInspect(t.Context(), containerID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if st := c.Container.State; !st.Running || time.Now().After(deadline) {
			return st
		}
		time.Sleep(100 * time.Millisecond)
	}
}
