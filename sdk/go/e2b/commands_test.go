package e2b_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/sdk/go/e2b"
	"github.com/warrenhq/warren/sdk/go/internal/envd/process"
)

func TestRunStreamsOutputAndReturnsResult(t *testing.T) {
	f := newFake(t)
	var got *process.StartRequest
	f.proc.start = func(_ context.Context, req *connect.Request[process.StartRequest], s *connect.ServerStream[process.StartResponse]) error {
		got = req.Msg
		s.Send(startEvent(7))
		s.Send(stdoutEvent("hel"))
		s.Send(stderrEvent("warn"))
		s.Send(stdoutEvent("lo\n"))
		return s.Send(endEvent(0, ""))
	}
	sbx := f.sandbox(t)
	var out bytes.Buffer
	res, err := sbx.Commands.Run(context.Background(), "echo hello", e2b.CommandOptions{Stdout: &out, User: "root", Cwd: "/tmp", Envs: map[string]string{"A": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "hello\n" || res.Stderr != "warn" || res.ExitCode != 0 || out.String() != "hello\n" {
		t.Errorf("result %+v, streamed %q", res, out.String())
	}
	if got.GetProcess().GetCmd() != "/bin/bash" || len(got.GetProcess().GetArgs()) != 3 || got.GetProcess().GetArgs()[2] != "echo hello" ||
		got.GetProcess().GetCwd() != "/tmp" || got.GetProcess().GetEnvs()["A"] != "1" || got.GetStdin() {
		t.Errorf("start request %v", got)
	}
	r, _ := f.last(t, "/process.Process/Start")
	for h, want := range map[string]string{
		"X-Access-Token":          testToken,
		"E2b-Sandbox-Id":          "isbx1",
		"E2b-Sandbox-Port":        "49983",
		"Keepalive-Ping-Interval": "50",
		"Authorization":           "Basic " + base64.StdEncoding.EncodeToString([]byte("root:")),
	} {
		if r.Header.Get(h) != want {
			t.Errorf("%s = %q, want %q", h, r.Header.Get(h), want)
		}
	}
	if r.Header.Get("Connect-Timeout-Ms") == "" {
		t.Error("no Connect-Timeout-Ms: the command would have no limit")
	}
}

func TestRunExitCodeIsCommandExitError(t *testing.T) {
	f := newFake(t)
	f.proc.start = func(_ context.Context, req *connect.Request[process.StartRequest], s *connect.ServerStream[process.StartResponse]) error {
		s.Send(startEvent(7))
		s.Send(stderrEvent("nope"))
		return s.Send(endEvent(2, "exit status 2"))
	}
	_, err := f.sandbox(t).Commands.Run(context.Background(), "false", e2b.CommandOptions{})
	var exit *e2b.CommandExitError
	if !errors.As(err, &exit) || exit.Result.ExitCode != 2 || exit.Result.Stderr != "nope" || exit.Error() != "exit status 2" || !errors.As(err, new(*e2b.SandboxError)) {
		t.Errorf("err = %T %v", err, err)
	}
}

func TestBackgroundHandle(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	f.proc.start = func(_ context.Context, req *connect.Request[process.StartRequest], s *connect.ServerStream[process.StartResponse]) error {
		s.Send(startEvent(7))
		s.Send(stdoutEvent("ready"))
		<-release
		return s.Send(endEvent(0, ""))
	}
	sbx := f.sandbox(t)
	ctx := context.Background()
	h, err := sbx.Commands.Start(ctx, "cat", e2b.CommandOptions{Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if h.PID != 7 {
		t.Errorf("pid %d", h.PID)
	}
	if _, done := h.ExitCode(); done {
		t.Error("ended before its end event")
	}
	if err := h.SendStdin(ctx, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if killed, err := h.Kill(ctx); !killed || err != nil {
		t.Errorf("kill = %v %v", killed, err)
	}
	if killed, err := sbx.Commands.Kill(ctx, 99); killed || err != nil {
		t.Errorf("kill of an unknown pid = %v %v", killed, err)
	}
	close(release)
	res, err := h.Wait(ctx)
	if err != nil || res.Stdout != "ready" || h.Stdout() != "ready" {
		t.Errorf("wait = %+v %v", res, err)
	}
	if len(f.proc.input) != 1 || string(f.proc.input[0]) != "abc" {
		t.Errorf("stdin %q", f.proc.input)
	}
	list, err := sbx.Commands.List(ctx)
	if err != nil || len(list) != 1 || list[0].PID != 7 || list[0].Args[2] != "sleep 10" {
		t.Errorf("list = %+v %v", list, err)
	}
}

func TestCommandTimeoutIsTimeoutError(t *testing.T) {
	f := newFake(t)
	f.proc.start = func(ctx context.Context, req *connect.Request[process.StartRequest], s *connect.ServerStream[process.StartResponse]) error {
		s.Send(startEvent(7))
		<-ctx.Done() // the deadline the client sent in Connect-Timeout-Ms
		return ctx.Err()
	}
	_, err := f.sandbox(t).Commands.Run(context.Background(), "sleep 10", e2b.CommandOptions{Timeout: 100 * time.Millisecond})
	if !errors.As(err, new(*e2b.TimeoutError)) {
		t.Errorf("err = %T %v", err, err)
	}
}

func TestStartWithoutStartEvent(t *testing.T) {
	f := newFake(t)
	f.proc.start = func(_ context.Context, req *connect.Request[process.StartRequest], s *connect.ServerStream[process.StartResponse]) error {
		return connect.NewError(connect.CodeInvalidArgument, errorString("cwd '/nope' does not exist"))
	}
	_, err := f.sandbox(t).Commands.Run(context.Background(), "pwd", e2b.CommandOptions{Cwd: "/nope"})
	var inv *e2b.InvalidArgumentError
	if !errors.As(err, &inv) || inv.Message != "cwd '/nope' does not exist" {
		t.Errorf("err = %T %v", err, err)
	}
}

func TestStreamCutOffIsTimeoutWhenTheSandboxIsGone(t *testing.T) {
	for _, tc := range []struct {
		health  int
		timeout bool
	}{{http.StatusBadGateway, true}, {http.StatusNoContent, false}} {
		t.Run(http.StatusText(tc.health), func(t *testing.T) {
			f := newFake(t)
			f.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(tc.health) })
			f.proc.start = func(_ context.Context, req *connect.Request[process.StartRequest], s *connect.ServerStream[process.StartResponse]) error {
				s.Send(startEvent(7))
				s.Send(stdoutEvent("partial"))
				panic(http.ErrAbortHandler) // the connection closes mid-stream, as when a sandbox is killed
			}
			h, err := f.sandbox(t).Commands.Start(context.Background(), "sleep 60", e2b.CommandOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = h.Wait(context.Background())
			var te *e2b.TimeoutError
			if errors.As(err, &te) != tc.timeout || err == nil {
				t.Errorf("health %d: %T %v", tc.health, err, err)
			}
		})
	}
}

func TestRunCodeReadsTheStream(t *testing.T) {
	f := newFake(t)
	f.mux.HandleFunc("POST /execute", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("E2b-Sandbox-Port") != "49999" || r.Header.Get("X-Access-Token") != testToken {
			apiError(w, 400, "headers")
			return
		}
		for _, l := range []string{
			`{"type":"stdout","text":"hi\n","timestamp":"2026-01-01T00:00:00Z"}`,
			`{"type":"keepalive"}`,
			`{"type":"result","is_main_result":true,"text":"3","png":"aGk="}`,
			`{"type":"error","name":"ValueError","value":"bad","traceback":"tb"}`,
			`{"type":"number_of_executions","execution_count":4}`,
			`{"type":"end_of_execution"}`,
		} {
			w.Write([]byte(l + "\n"))
		}
	})
	var seen []string
	exec, err := f.sandbox(t).RunCode(context.Background(), "x", e2b.RunCodeOptions{OnStdout: func(m e2b.OutputMessage) { seen = append(seen, m.Line) }})
	if err != nil {
		t.Fatal(err)
	}
	if exec.Text() != "3" || exec.Results[0].PNG != "aGk=" || exec.Error.Name != "ValueError" || exec.ExecutionCount != 4 || len(seen) != 1 || exec.Logs.Stdout[0] != "hi\n" {
		t.Errorf("execution %+v, seen %q", exec, seen)
	}
}

func TestCreateWithMCPStartsTheGateway(t *testing.T) {
	f := newFake(t)
	var got *process.StartRequest
	f.proc.start = func(_ context.Context, req *connect.Request[process.StartRequest], s *connect.ServerStream[process.StartResponse]) error {
		got = req.Msg
		s.Send(startEvent(7))
		return s.Send(endEvent(0, ""))
	}
	sbx, err := f.client().Create(context.Background(), e2b.SandboxOptions{
		MCP: map[string]any{"echo": map[string]any{"k": "v"}},
		IAM: map[string]e2b.IAMToken{"aws": {Audience: "sts", TokenType: "JWT-SVID"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, body := f.last(t, "/v2/sandboxes")
	if !strings.Contains(body, `"templateID":"mcp-gateway"`) || !strings.Contains(body, `"mcp":{"echo":{"k":"v"}}`) || !strings.Contains(body, `"iam":{"tokens":{"aws":{"audience":"sts","tokenType":"JWT-SVID"}}}`) {
		t.Errorf("body %s", body)
	}
	token, _ := sbx.MCPToken(context.Background())
	if got.GetProcess().GetArgs()[2] != `mcp-gateway --config '{"echo":{"k":"v"}}'` || got.GetProcess().GetEnvs()["GATEWAY_ACCESS_TOKEN"] != token || len(token) != 32 {
		t.Errorf("gateway start %v, token %q", got, token)
	}
	if sbx.MCPURL() != "https://50005-isbx1.test.local/mcp" {
		t.Errorf("url %s", sbx.MCPURL())
	}
}
