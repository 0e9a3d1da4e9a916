package process

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/proto/process"
)

// Nothing a client sends may crash the agent; every case gets a clear error
// and the agent keeps serving.
func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := t.Context()
	startErr := func(req *process.StartRequest) error {
		return collect(t, h.start(t, ctx, req)).err
	}
	withCmd := func(cmd string, args ...string) *process.StartRequest {
		return &process.StartRequest{Process: &process.ProcessConfig{Cmd: cmd, Args: args}}
	}
	tests := []struct {
		name string
		call func() error
		code connect.Code
		msg  string
	}{
		{"start without a process", func() error { return startErr(&process.StartRequest{}) }, connect.CodeInvalidArgument, "process.cmd is required"},
		{"start with an empty cmd", func() error { return startErr(withCmd("")) }, connect.CodeInvalidArgument, "process.cmd is required"},
		{"start with the reserved tag", func() error {
			req := bash("true")
			req.Tag = new("_system")
			return startErr(req)
		}, connect.CodeInvalidArgument, "tag '_system' is reserved"},
		{"start a missing program", func() error { return startErr(withCmd("/no/such/program")) }, connect.CodeInvalidArgument, "cannot start '/no/such/program'"},
		{"start a program not on PATH", func() error { return startErr(withCmd("no-such-program-xyz")) }, connect.CodeInvalidArgument, "cannot start"},
		{"start a non-executable", func() error { return startErr(withCmd("/etc/passwd")) }, connect.CodeInvalidArgument, "cannot start"},
		{"NUL in an argument", func() error { return startErr(withCmd("/bin/echo", "a\x00b")) }, connect.CodeInvalidArgument, "NUL"},
		{"NUL in cwd", func() error {
			req := bash("true")
			req.Process.Cwd = new("/tmp\x00x")
			return startErr(req)
		}, connect.CodeInvalidArgument, "NUL"},
		{"env name with =", func() error {
			req := bash("true")
			req.Process.Envs = map[string]string{"A=B": "c"}
			return startErr(req)
		}, connect.CodeInvalidArgument, `invalid environment variable "A=B"`},
		{"empty env name", func() error {
			req := bash("true")
			req.Process.Envs = map[string]string{"": "c"}
			return startErr(req)
		}, connect.CodeInvalidArgument, "invalid environment variable"},
		{"connect without a selector", func() error {
			cs, err := h.client.Connect(ctx, connect.NewRequest(&process.ConnectRequest{}))
			if err != nil {
				return err
			}
			return collect(t, cs).err
		}, connect.CodeInvalidArgument, "selector"},
		{"connect with an empty selector", func() error {
			cs, err := h.client.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: &process.ProcessSelector{}}))
			if err != nil {
				return err
			}
			return collect(t, cs).err
		}, connect.CodeInvalidArgument, "selector"},
		{"signal without a selector", func() error {
			_, err := h.client.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Signal: process.Signal_SIGNAL_SIGKILL}))
			return err
		}, connect.CodeInvalidArgument, "selector"},
		{"input without a selector", func() error {
			_, err := h.client.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{}))
			return err
		}, connect.CodeInvalidArgument, "selector"},
		{"update without a selector", func() error {
			_, err := h.client.Update(ctx, connect.NewRequest(&process.UpdateRequest{}))
			return err
		}, connect.CodeInvalidArgument, "selector"},
		{"close stdin without a selector", func() error {
			_, err := h.client.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{}))
			return err
		}, connect.CodeInvalidArgument, "selector"},
		{"a malformed timeout header", func() error {
			return collect(t, h.start(t, ctx, bash("true"), "Connect-Timeout-Ms", "soon")).err
		}, connect.CodeInvalidArgument, "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCode(t, tt.call(), tt.code, tt.msg)
		})
	}
	if r := h.run(t, bash("echo still here")); r.stdout != "still here\n" {
		t.Errorf("after malformed requests got %q", r.stdout)
	}
}

// Bodies that are not valid messages are refused by connect-go itself.
func TestMalformedBodies(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tests := []struct {
		name        string
		method      string
		contentType string
		body        string
		status      int
	}{
		{"json of the wrong shape", "SendSignal", "application/json", `{"process": 5}`, http.StatusBadRequest},
		{"not json", "List", "application/json", `{{{`, http.StatusBadRequest},
		{"garbage protobuf", "SendInput", "application/proto", "\xff\xff\xff\xff", http.StatusBadRequest},
		{"unknown method", "Explode", "application/json", `{}`, http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := http.Post(h.url+"/process.Process/"+tt.method, tt.contentType, bytes.NewBufferString(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			if res.StatusCode != tt.status {
				t.Errorf("status %d, want %d", res.StatusCode, tt.status)
			}
		})
	}
	if r := h.run(t, bash("echo still here")); !strings.Contains(r.stdout, "still here") {
		t.Errorf("after malformed bodies got %q", r.stdout)
	}
}
