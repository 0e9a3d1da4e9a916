// Package oom ranks a sandbox's processes for the kernel's OOM killer, so
// that what a user runs is killed before the agent that serves the
// sandbox. The agent and its init keep the container's score (0 on
// Docker; on Kubernetes the node agent lowers the kubelet's to 0 once the
// pod runs, nodeagent.SpareAgent: lowering it needs CAP_SYS_RESOURCE,
// which a sandbox has not), and the agent raises every process it starts
// for a user to UserScore. The killer picks the highest rss + oom_score_adj × limit /
// 1000: at +1000 every marked process outranks the agent whatever their
// sizes. It does not limit memory or processes; the container's cgroup
// does.
package oom

import (
	"os"
	"strconv"
)

// UserScore is the oom_score_adj of the processes the agent starts for a
// user (commands, PTYs, code-interpreter kernels) and so, inherited, of
// everything they start: the OOM killer's first choice, inside the
// sandbox's memory limit and on the host alike. Raising a score needs no
// privilege; a user's process may lower its own again, but only to the
// container's minimum.
const UserScore = 1000

// MarkUserProcess gives the process pid UserScore. The agent calls it
// right after the process starts; whatever the process forked before then
// keeps the agent's score, and competes with the agent by size alone.
func MarkUserProcess(pid int) error {
	return os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte(strconv.Itoa(UserScore)), 0)
}
