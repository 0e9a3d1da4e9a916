package process

import (
	"strconv"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/agent/oom"
)

// TestProcessesAreTheOOMKillersFirstChoice: a command and what it forks
// carry oom.UserScore, so that running out of memory kills them, not the
// agent.
func TestProcessesAreTheOOMKillersFirstChoice(t *testing.T) {
	h := newHarness(t)
	// The child sleeps first so the agent has marked the shell before
	// it forks.
	r := h.run(t, bash("sleep 0.2; cat /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'"))
	want := strconv.Itoa(oom.UserScore)
	if got := strings.Fields(string(r.stdout)); len(got) != 2 || got[0] != want || got[1] != want {
		t.Fatalf("scores %q, want %s twice", r.stdout, want)
	}
}
