package oom

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestMarkUserProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if err := MarkUserProcess(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(UserScore) {
		t.Fatalf("oom_score_adj = %s, want %d", got, UserScore)
	}
	mine, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(mine)) == strconv.Itoa(UserScore) {
		t.Fatal("the caller's own score changed")
	}
}
