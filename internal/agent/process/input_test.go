package process

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/proto/process"
)

func stdinInput(s string) *process.ProcessInput {
	return &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte(s)}}
}

func ptyInput(s string) *process.ProcessInput {
	return &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte(s)}}
}

func TestStdin(t *testing.T) {
	tests := []struct {
		name  string
		stdin *bool // StartRequest.stdin; nil is what old clients send
	}{
		{"absent keeps a pipe open", nil},
		{"true", new(true)},
	}
	for _, v := range variants {
		for _, tt := range tests {
			t.Run(v.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, v)
				req := bash("cat")
				req.Stdin = tt.stdin
				s, pid := h.started(t, t.Context(), req)
				for _, in := range []string{"hello ", "wörld\n", "\x00\x01 binary"} {
					if _, err := h.client.SendInput(t.Context(), connect.NewRequest(&process.SendInputRequest{Process: pidSel(pid), Input: stdinInput(in)})); err != nil {
						t.Fatalf("SendInput: %v", err)
					}
				}
				if _, err := h.client.CloseStdin(t.Context(), connect.NewRequest(&process.CloseStdinRequest{Process: pidSel(pid)})); err != nil {
					t.Fatalf("CloseStdin: %v", err)
				}
				r := rest(t, s)
				if r.stdout != "hello wörld\n\x00\x01 binary" || r.end.GetExitCode() != 0 {
					t.Errorf("cat printed %q and exited %d, want the input and 0", r.stdout, r.end.GetExitCode())
				}
			})
		}
	}
}

func TestStdinErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := t.Context()
	send := func(pid uint32, in *process.ProcessInput) error {
		_, err := h.client.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: pidSel(pid), Input: in}))
		return err
	}
	closeStdin := func(pid uint32) error {
		_, err := h.client.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: pidSel(pid)}))
		return err
	}

	// stdin false: the process reads /dev/null and input is refused.
	if r := h.run(t, bash("cat; echo rc=$?")); r.stdout != "rc=0\n" {
		t.Errorf("cat without stdin printed %q, want it to read EOF at once", r.stdout)
	}
	_, noStdin := h.started(t, ctx, bash("sleep 5"))
	_, pipe := h.started(t, ctx, &process.StartRequest{Process: bash("sleep 5").Process, Stdin: new(true)})
	_, tty := h.started(t, ctx, &process.StartRequest{Process: bash("sleep 5").Process, Pty: &process.PTY{Size: &process.PTY_Size{Cols: 80, Rows: 24}}})
	if err := closeStdin(pipe); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}

	tests := []struct {
		name string
		call func() error
		code connect.Code
		msg  string
	}{
		{"input to a process without stdin", func() error { return send(noStdin, stdinInput("x")) }, connect.CodeFailedPrecondition, "no open stdin"},
		{"input after closing stdin", func() error { return send(pipe, stdinInput("x")) }, connect.CodeFailedPrecondition, "no open stdin"},
		{"closing stdin twice", func() error { return closeStdin(pipe) }, connect.CodeFailedPrecondition, "no open stdin"},
		{"closing stdin of a pty", func() error { return closeStdin(tty) }, connect.CodeFailedPrecondition, "pty"},
		{"stdin bytes to a pty", func() error { return send(tty, stdinInput("x")) }, connect.CodeFailedPrecondition, "pty"},
		{"pty bytes to a pipe", func() error { return send(pipe, ptyInput("x")) }, connect.CodeFailedPrecondition, "not started with a pty"},
		{"no input", func() error { return send(pipe, nil) }, connect.CodeInvalidArgument, "input"},
		{"empty input", func() error { return send(pipe, &process.ProcessInput{}) }, connect.CodeInvalidArgument, "input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCode(t, tt.call(), tt.code, tt.msg)
		})
	}
}

// A process that never reads its stdin must not wedge SendInput forever:
// the call gives up with the client's deadline and later calls still work.
func TestStdinHugeInputToProcessNotReading(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, pid := h.started(t, t.Context(), &process.StartRequest{Process: bash("sleep 10").Process, Stdin: new(true)})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	huge := strings.Repeat("x", 4<<20)
	_, err := h.client.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: pidSel(pid), Input: stdinInput(huge)}))
	wantCode(t, err, connect.CodeDeadlineExceeded, "")
	if _, err := h.client.CloseStdin(t.Context(), connect.NewRequest(&process.CloseStdinRequest{Process: pidSel(pid)})); err != nil {
		t.Fatalf("CloseStdin after an abandoned write: %v", err)
	}
}

func TestStreamInput(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, v)
			s, pid := h.started(t, t.Context(), &process.StartRequest{Process: bash("cat").Process, Stdin: new(true)})
			in := h.client.StreamInput(t.Context())
			events := []*process.StreamInputRequest{
				{Event: &process.StreamInputRequest_Start{Start: &process.StreamInputRequest_StartEvent{Process: pidSel(pid)}}},
				{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{Input: stdinInput("one ")}}},
				{Event: &process.StreamInputRequest_Keepalive{Keepalive: &process.StreamInputRequest_KeepAlive{}}},
				{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{Input: stdinInput("two")}}},
			}
			for _, ev := range events {
				if err := in.Send(ev); err != nil {
					t.Fatalf("Send: %v", err)
				}
			}
			if _, err := in.CloseAndReceive(); err != nil {
				t.Fatalf("StreamInput: %v", err)
			}
			if _, err := h.client.CloseStdin(t.Context(), connect.NewRequest(&process.CloseStdinRequest{Process: pidSel(pid)})); err != nil {
				t.Fatalf("CloseStdin: %v", err)
			}
			if r := rest(t, s); r.stdout != "one two" {
				t.Errorf("cat printed %q, want %q", r.stdout, "one two")
			}

			in = h.client.StreamInput(t.Context())
			_ = in.Send(events[1])
			_, err := in.CloseAndReceive()
			wantCode(t, err, connect.CodeFailedPrecondition, "first event must be start")
		})
	}
}
