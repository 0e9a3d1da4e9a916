package nodeagent

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
)

// AgentScore is the oom_score_adj SpareAgent gives a sandbox's init and
// agent: the score they have in a Docker container. The agent raises what
// it starts for users to 1000, so inside the pod's memory limit the OOM
// killer takes user code first whatever its size. With the kubelet's
// score (2–999 for a Burstable pod) the agent, bigger than most of its
// users' processes and 1 point (a thousandth of the limit) under them, is
// the killer's first choice.
const AgentScore = 0

// SpareAgent gives AgentScore to every process of the pod's containers
// whose score is above it. Called right after the pod starts, before any
// user has reached it, these are the sandbox's init and agent, and what
// the init starts again later inherits the score; the pause process
// (-998) is left as it is.
//
// The node agent sees the pods' processes in its /proc only in the host's
// PID namespace (hostPID), and lowering a score below the one the
// container runtime set needs CAP_SYS_RESOURCE.
func (c *Cgroups) SpareAgent(uid string) error {
	rel, err := c.find(uid)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.hierarchy("pids"), rel)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	seen := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		pids, err := readPids(filepath.Join(dir, e.Name(), "cgroup.procs"))
		if err != nil {
			return err
		}
		for _, pid := range pids {
			err := c.lowerScore(pid)
			if errors.Is(err, os.ErrNotExist) {
				continue // ended meanwhile
			}
			if err != nil {
				return err
			}
			seen++
		}
	}
	if seen == 0 {
		return sandbox.Errorf(sandbox.KindUnavailable, "the node agent sees none of pod %s's processes in %s: it must run in the host's PID namespace (hostPID: true)", uid, c.proc)
	}
	return nil
}

// lowerScore sets pid's score to AgentScore if it is above.
func (c *Cgroups) lowerScore(pid int) error {
	file := filepath.Join(c.proc, strconv.Itoa(pid), "oom_score_adj")
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	score, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if score <= AgentScore {
		return nil
	}
	err = os.WriteFile(file, []byte(strconv.Itoa(AgentScore)), 0)
	if errors.Is(err, os.ErrPermission) {
		return sandbox.Errorf(sandbox.KindUnavailable, "cannot lower the OOM score of pid %d from %d: the node agent needs the capability SYS_RESOURCE", pid, score)
	}
	return err
}

// readPids reads a cgroup.procs file. A process of another PID namespace
// reads as 0 and is left out; a cgroup removed meanwhile holds none.
func readPids(file string) ([]int, error) {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var pids []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, sc.Err()
}
