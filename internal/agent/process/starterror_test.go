package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"
)

func TestStartError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code connect.Code
		msg  string
	}{
		{"pids limit reached", &os.SyscallError{Syscall: "fork/exec /bin/bash", Err: syscall.EAGAIN}, connect.CodeResourceExhausted, "process limit"},
		{"no such program", fmt.Errorf("exec: %w", exec.ErrNotFound), connect.CodeInvalidArgument, "cannot start"},
		{"deadline", context.DeadlineExceeded, connect.CodeDeadlineExceeded, "cannot start"},
		{"anything else", errors.New("boom"), connect.CodeInternal, "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ce *connect.Error
			if !errors.As(startError("/bin/bash", tt.err), &ce) {
				t.Fatal("not a connect error")
			}
			if ce.Code() != tt.code || !strings.Contains(ce.Message(), tt.msg) {
				t.Fatalf("got %v %q, want %v containing %q", ce.Code(), ce.Message(), tt.code, tt.msg)
			}
		})
	}
}

// A start refused for the pids limit says which limit: the number in the
// sandbox's cgroup, and the flag that sets it.
func TestProcessLimitNamed(t *testing.T) {
	dir := t.TempDir()
	limited, unlimited := dir+"/limited", dir+"/unlimited"
	os.WriteFile(limited, []byte("4096\n"), 0o644)
	os.WriteFile(unlimited, []byte("max\n"), 0o644)
	for _, tc := range []struct {
		name  string
		files []string
		want  string
	}{
		{"v2 file", []string{limited, dir + "/none"}, " of 4096 processes and threads (warren serve --pids-limit)"},
		{"v1 file after a missing v2 one", []string{dir + "/none", limited}, " of 4096 processes and threads (warren serve --pids-limit)"},
		{"no limit", []string{unlimited}, ""},
		{"no cgroup files (gVisor)", []string{dir + "/none"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := processLimit(tc.files...); got != tc.want {
				t.Errorf("processLimit = %q, want %q", got, tc.want)
			}
		})
	}
}
