package process

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/proto/process"
)

func ptyReq(args []string, cols, rows uint32) *process.StartRequest {
	return &process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: args, Envs: map[string]string{"TERM": "xterm-256color"}},
		Pty:     &process.PTY{Size: &process.PTY_Size{Cols: cols, Rows: rows}},
	}
}

func TestPTYResize(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, v)
			s, pid := h.started(t, t.Context(), ptyReq([]string{"-c", "stty size; read; stty size"}, 100, 40))
			if !s.Receive() || !strings.Contains(string(s.Msg().GetEvent().GetData().GetPty()), "40 100") {
				t.Fatalf("first output %v, want the start size 40 100 (err %v)", s.Msg(), s.Err())
			}
			size := &process.PTY{Size: &process.PTY_Size{Cols: 120, Rows: 50}}
			if _, err := h.client.Update(t.Context(), connect.NewRequest(&process.UpdateRequest{Process: pidSel(pid), Pty: size})); err != nil {
				t.Fatalf("Update: %v", err)
			}
			if _, err := h.client.SendInput(t.Context(), connect.NewRequest(&process.SendInputRequest{Process: pidSel(pid), Input: ptyInput("\n")})); err != nil {
				t.Fatalf("SendInput: %v", err)
			}
			r := rest(t, s)
			if !strings.Contains(r.pty, "50 120") || r.end.GetExitCode() != 0 {
				t.Errorf("after resize got %q exit %d, want 50 120 and 0", r.pty, r.end.GetExitCode())
			}
		})
	}
}

// The SDK's pty.create runs an interactive login shell and types into it.
func TestPTYInteractiveShell(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s, pid := h.started(t, t.Context(), ptyReq([]string{"-i", "-l"}, 80, 24))
	if _, err := h.client.SendInput(t.Context(), connect.NewRequest(&process.SendInputRequest{Process: pidSel(pid), Input: ptyInput("echo $((6*7)) $(tput cols)\nexit 0\n")})); err != nil {
		t.Fatalf("SendInput: %v", err)
	}
	r := rest(t, s)
	if !strings.Contains(r.pty, "42 80") || r.end.GetExitCode() != 0 {
		t.Errorf("shell printed %q and exited %d, want 42 80 and 0", r.pty, r.end.GetExitCode())
	}
}

func TestPTYChunks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.run(t, ptyReq([]string{"-c", "head -c 100000 /dev/zero | tr '\\0' a"}, 80, 24))
	if got := strings.Count(r.pty, "a"); got != 100000 {
		t.Errorf("got %d bytes through the pty, want 100000", got)
	}
	for _, n := range r.chunks {
		if n > ptyChunk {
			t.Errorf("pty data event of %d bytes, want at most %d", n, ptyChunk)
		}
	}
}

func TestPTYSizeErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, tty := h.started(t, t.Context(), ptyReq([]string{"-c", "sleep 5"}, 80, 24))
	_, pipe := h.started(t, t.Context(), bash("sleep 5"))
	update := func(pid uint32, pty *process.PTY) error {
		_, err := h.client.Update(t.Context(), connect.NewRequest(&process.UpdateRequest{Process: pidSel(pid), Pty: pty}))
		return err
	}
	size := func(cols, rows uint32) *process.PTY {
		return &process.PTY{Size: &process.PTY_Size{Cols: cols, Rows: rows}}
	}
	tests := []struct {
		name string
		call func() error
		code connect.Code // 0 means success
		msg  string
	}{
		{"start with zero cols", func() error { return collect(t, h.start(t, t.Context(), ptyReq(nil, 0, 24))).err }, connect.CodeInvalidArgument, "invalid pty size 0x24"},
		{"start with a size too big", func() error { return collect(t, h.start(t, t.Context(), ptyReq(nil, 80, 1<<20))).err }, connect.CodeInvalidArgument, "invalid pty size"},
		{"start without a size uses 80x24", func() error {
			req := ptyReq([]string{"-c", "stty size"}, 0, 0)
			req.Pty.Size = nil
			if r := h.run(t, req); !strings.Contains(r.pty, "24 80") {
				t.Errorf("stty size = %q, want 24 80", r.pty)
			}
			return nil
		}, 0, ""},
		{"resize to zero", func() error { return update(tty, size(0, 0)) }, connect.CodeInvalidArgument, "invalid pty size"},
		{"resize without a size", func() error { return update(tty, &process.PTY{}) }, connect.CodeInvalidArgument, "pty.size is required"},
		{"update without a pty is a no-op", func() error { return update(tty, nil) }, 0, ""},
		{"resize a pipe process", func() error { return update(pipe, size(80, 24)) }, connect.CodeFailedPrecondition, "not started with a pty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if tt.code == 0 {
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				return
			}
			wantCode(t, err, tt.code, tt.msg)
		})
	}
}
