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
