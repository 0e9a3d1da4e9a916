package nodeagent

import (
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

func TestSpareAgentLowersTheSandboxsProcessesOnly(t *testing.T) {
	root := v1Tree(t)
	cg, err := NewCgroups(root)
	if err != nil {
		t.Fatal(err)
	}
	proc := t.TempDir()
	cg.proc = proc
	pod := "pids/node-b/kubepods/burstable/pod" + uid
	// The pause container; the sandbox's init (the kubelet's score) and
	// agent, one process that ended before it was read; another pod.
	write(t, root, pod+"/pause/cgroup.procs", "10\n")
	write(t, root, pod+"/sandbox/cgroup.procs", "20\n21\n22\n")
	write(t, root, "pids/node-a/kubepods/besteffort/podother/ctr/cgroup.procs", "30\n")
	for pid, score := range map[string]string{"10": "-998", "20": "999", "21": "999", "30": "1000"} {
		write(t, proc, pid+"/oom_score_adj", score+"\n")
	}
	if err := cg.SpareAgent(uid); err != nil {
		t.Fatal(err)
	}
	for pid, want := range map[string]string{"10": "-998", "20": "0", "21": "0", "30": "1000"} {
		if got := read(t, proc, pid+"/oom_score_adj"); got != want {
			t.Errorf("pid %s: score %s, want %s", pid, got, want)
		}
	}
}

func TestSpareAgentSaysWhenItSeesNoProcess(t *testing.T) {
	root := v1Tree(t)
	cg, err := NewCgroups(root)
	if err != nil {
		t.Fatal(err)
	}
	cg.proc = t.TempDir()
	// Outside the host's PID namespace every process reads as 0.
	write(t, root, "pids/node-b/kubepods/burstable/pod"+uid+"/sandbox/cgroup.procs", "0\n0\n")
	if err := cg.SpareAgent(uid); sandbox.KindOf(err) != sandbox.KindUnavailable {
		t.Errorf("got %v, want an error naming hostPID", err)
	}
	if err := cg.SpareAgent("11111111-2222-4333-8444-555555555555"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("unknown pod: %v", err)
	}
}
