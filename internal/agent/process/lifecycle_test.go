package process

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	gocmp "github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/warrenhq/warren/proto/process"
)

func TestKeepalive(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, v)
			r := h.run(t, bash("sleep 0.5; echo done"), "Keepalive-Ping-Interval", "0.05")
			if r.keepalives < 1 || r.stdout != "done\n" {
				t.Errorf("got %d keepalives and %q while idle for 0.5 s at 0.05 s, want some and done", r.keepalives, r.stdout)
			}
			if r := h.run(t, bash("sleep 0.2")); r.keepalives != 0 {
				t.Errorf("got %d keepalives at the default 90 s interval, want none", r.keepalives)
			}
		})
	}
}

func TestKeepaliveInterval(t *testing.T) {
	tests := []struct {
		header string
		want   time.Duration
	}{
		{"", defaultKeepalive},
		{"50", 50 * time.Second},
		{"0.25", 250 * time.Millisecond},
		{"0", defaultKeepalive},
		{"-3", defaultKeepalive},
		{"NaN", defaultKeepalive},
		{"abc", defaultKeepalive},
		{"0.000001", minKeepalive},
		{"1e300", maxKeepalive},
		{"+Inf", maxKeepalive},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			h := http.Header{}
			h.Set("Keepalive-Ping-Interval", tt.header)
			if got := keepaliveInterval(h); got != tt.want {
				t.Errorf("keepaliveInterval(%q) = %v, want %v", tt.header, got, tt.want)
			}
		})
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(after, "Z")
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, v)
			// Long enough for the start under -race on a loaded machine.
			ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
			defer cancel()
			s, pid := h.started(t, ctx, bash("sleep 30 & echo $!; wait"))
			if !s.Receive() {
				t.Fatalf("no output: %v", s.Err())
			}
			child, err := strconv.Atoi(strings.TrimSpace(string(s.Msg().GetEvent().GetData().GetStdout())))
			if err != nil {
				t.Fatalf("child pid: %v", err)
			}
			for s.Receive() {
			}
			wantCode(t, s.Err(), connect.CodeDeadlineExceeded, "")

			eventually(t, "the shell and its child are killed", func() bool { return !alive(int(pid)) && !alive(child) })
			cs, err := h.client.Connect(t.Context(), connect.NewRequest(&process.ConnectRequest{Process: pidSel(pid)}))
			if err != nil {
				t.Fatal(err)
			}
			if r := collect(t, cs); r.end.GetStatus() != "signal: killed" {
				t.Errorf("end after the deadline = %v, want signal: killed", r.end)
			}
		})
	}
}

// The SDK sends Connect-Timeout-Ms: 0 for commands without a timeout.
func TestZeroTimeoutMeansNone(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if r := h.run(t, bash("sleep 0.2; echo ok"), "Connect-Timeout-Ms", "0"); r.stdout != "ok\n" {
		t.Errorf("got %q, want ok", r.stdout)
	}
}

func TestDisconnectLeavesProcessRunning(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, v)
			ctx, cancel := context.WithCancel(t.Context())
			req := bash("read line; echo got $line")
			req.Stdin = new(true)
			s, pid := h.started(t, ctx, req, "Connect-Timeout-Ms", "60000")
			cancel()
			for s.Receive() {
			}
			_ = s.Close()
			eventually(t, "the agent sees the client leave", func() bool { return h.attached(pid) == 0 })
			cs, err := h.client.Connect(t.Context(), connect.NewRequest(&process.ConnectRequest{Process: pidSel(pid)}))
			if err != nil {
				t.Fatal(err)
			}
			if !cs.Receive() || cs.Msg().GetEvent().GetStart().GetPid() != pid {
				t.Fatalf("reattach: no start{%d}: %v %v", pid, cs.Msg(), cs.Err())
			}
			if _, err := h.client.SendInput(t.Context(), connect.NewRequest(&process.SendInputRequest{Process: pidSel(pid), Input: stdinInput("hi\n")})); err != nil {
				t.Fatalf("SendInput after the first client left: %v", err)
			}
			if r := rest(t, cs); r.stdout != "got hi\n" || r.end.GetExitCode() != 0 {
				t.Errorf("reattached stream got %q exit %v, want the process to have survived", r.stdout, r.end)
			}
		})
	}
}

func TestReattach(t *testing.T) {
	tests := []struct {
		name string
		sel  func(pid uint32) *process.ProcessSelector
	}{
		{"by pid", pidSel},
		{"by tag", func(uint32) *process.ProcessSelector { return tagSel("my-tag") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			req := bash("read line; echo got $line")
			req.Stdin, req.Tag = new(true), new("my-tag")
			s, pid := h.started(t, t.Context(), req)
			cs, err := h.client.Connect(t.Context(), connect.NewRequest(&process.ConnectRequest{Process: tt.sel(pid)}))
			if err != nil {
				t.Fatal(err)
			}
			if !cs.Receive() || cs.Msg().GetEvent().GetStart().GetPid() != pid {
				t.Fatalf("no start{%d}: %v %v", pid, cs.Msg(), cs.Err())
			}
			if _, err := h.client.SendInput(t.Context(), connect.NewRequest(&process.SendInputRequest{Process: tt.sel(pid), Input: stdinInput("hi\n")})); err != nil {
				t.Fatal(err)
			}
			for name, r := range map[string]result{"Start": rest(t, s), "Connect": rest(t, cs)} {
				if r.stdout != "got hi\n" || r.end.GetExitCode() != 0 {
					t.Errorf("%s stream got %q end %v, want every attached stream to see the output", name, r.stdout, r.end)
				}
			}
		})
	}
}

func TestReplayAfterExit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	connectTo := func(sel *process.ProcessSelector) result {
		cs, err := h.client.Connect(t.Context(), connect.NewRequest(&process.ConnectRequest{Process: sel}))
		if err != nil {
			t.Fatal(err)
		}
		return collect(t, cs)
	}

	req := bash("echo gone; exit 4")
	req.Tag = new("done")
	ran := h.run(t, req)
	for _, sel := range []*process.ProcessSelector{pidSel(ran.pid), tagSel("done")} {
		r := connectTo(sel)
		if r.pid != ran.pid || r.stdout != "" || r.err != nil {
			t.Errorf("replay for %v: pid %d output %q err %v, want start{%d} and no output", sel, r.pid, r.stdout, r.err, ran.pid)
		}
		if diff := gocmp.Diff(ran.end, r.end, protocmp.Transform()); diff != "" {
			t.Errorf("replayed end (-want +got):\n%s", diff)
		}
	}

	h.svc.mu.Lock()
	h.svc.retain = time.Millisecond // for processes ending from now on
	h.svc.mu.Unlock()
	short := h.run(t, bash("true"))
	eventually(t, "the exited process is forgotten", func() bool {
		var cerr *connect.Error
		return errors.As(connectTo(pidSel(short.pid)).err, &cerr) && cerr.Code() == connect.CodeNotFound
	})
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := t.Context()
	const pid = 4000000 // above any pid_max
	tests := []struct {
		name string
		call func() error
		msg  string
	}{
		{"connect by pid", func() error {
			cs, err := h.client.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: pidSel(pid)}))
			if err != nil {
				return err
			}
			return collect(t, cs).err
		}, "process with pid 4000000 not found"},
		{"connect by tag", func() error {
			cs, err := h.client.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: tagSel("nope")}))
			if err != nil {
				return err
			}
			return collect(t, cs).err
		}, "process with tag nope not found"},
		{"send input", func() error {
			_, err := h.client.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: pidSel(pid), Input: stdinInput("x")}))
			return err
		}, "process with pid 4000000 not found"},
		{"send signal", func() error {
			_, err := h.client.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: pidSel(pid), Signal: process.Signal_SIGNAL_SIGKILL}))
			return err
		}, "process with pid 4000000 not found"},
		{"update", func() error {
			_, err := h.client.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: tagSel("nope")}))
			return err
		}, "process with tag nope not found"},
		{"close stdin", func() error {
			_, err := h.client.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: pidSel(pid)}))
			return err
		}, "process with pid 4000000 not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCode(t, tt.call(), connect.CodeNotFound, tt.msg)
		})
	}
}

func TestSignal(t *testing.T) {
	tests := []struct {
		name   string
		signal process.Signal
		status string // "" when the signal is refused
	}{
		{"sigterm", process.Signal_SIGNAL_SIGTERM, "signal: terminated"},
		{"sigkill", process.Signal_SIGNAL_SIGKILL, "signal: killed"},
		{"unspecified", process.Signal_SIGNAL_UNSPECIFIED, ""},
		{"sigint", process.Signal(2), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			// Two commands keep bash around as the parent of sleep.
			s, pid := h.started(t, t.Context(), bash("sleep 30 & echo $!; wait; echo unreachable"))
			if !s.Receive() {
				t.Fatalf("no output: %v", s.Err())
			}
			child, _ := strconv.Atoi(strings.TrimSpace(string(s.Msg().GetEvent().GetData().GetStdout())))
			_, err := h.client.SendSignal(t.Context(), connect.NewRequest(&process.SendSignalRequest{Process: pidSel(pid), Signal: tt.signal}))
			if tt.status == "" {
				wantCode(t, err, connect.CodeUnimplemented, "only SIGTERM and SIGKILL")
				_, _ = h.client.SendSignal(t.Context(), connect.NewRequest(&process.SendSignalRequest{Process: pidSel(pid), Signal: process.Signal_SIGNAL_SIGKILL}))
				return
			}
			if err != nil {
				t.Fatalf("SendSignal: %v", err)
			}
			r := rest(t, s)
			if r.end.GetStatus() != tt.status || r.end.GetExitCode() != -1 || r.stdout != "" {
				t.Errorf("end %v output %q, want %s and exit code -1", r.end, r.stdout, tt.status)
			}
			eventually(t, "the child in the group dies too", func() bool { return !alive(child) })
			_, err = h.client.SendSignal(t.Context(), connect.NewRequest(&process.SendSignalRequest{Process: pidSel(pid), Signal: tt.signal}))
			wantCode(t, err, connect.CodeNotFound, "not found")
		})
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	dir := t.TempDir()
	tagged := &process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", "sleep 30"}, Envs: map[string]string{"A": "1"}, Cwd: &dir},
		Tag:     new("listed"),
		Stdin:   new(false),
	}
	_, taggedPID := h.started(t, t.Context(), tagged)
	plain := bash("sleep 30")
	_, plainPID := h.started(t, t.Context(), plain)
	h.run(t, bash("true")) // exited processes are not listed

	res, err := h.client.List(t.Context(), connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	want := []*process.ProcessInfo{
		{Config: tagged.Process, Pid: taggedPID, Tag: new("listed")},
		{Config: plain.Process, Pid: plainPID},
	}
	byPID := func(a, b *process.ProcessInfo) int { return cmp.Compare(a.GetPid(), b.GetPid()) }
	got := res.Msg.GetProcesses()
	slices.SortFunc(want, byPID)
	slices.SortFunc(got, byPID)
	if diff := gocmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}

	if _, err := h.client.SendSignal(t.Context(), connect.NewRequest(&process.SendSignalRequest{Process: tagSel("listed"), Signal: process.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the killed process leaves the list", func() bool {
		res, err := h.client.List(t.Context(), connect.NewRequest(&process.ListRequest{}))
		return err == nil && len(res.Msg.GetProcesses()) == 1 && res.Msg.GetProcesses()[0].GetPid() == plainPID
	})
}

func TestCloseKillsProcesses(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s, pid := h.started(t, t.Context(), bash("sleep 30; echo unreachable"))
	done := make(chan struct{})
	go func() { h.svc.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	if alive(int(pid)) {
		t.Error("process survived Close")
	}
	if r := rest(t, s); r.end.GetStatus() != "signal: killed" {
		t.Errorf("stream end %v err %v, want signal: killed", r.end, r.err)
	}
	if err := syscall.Kill(int(pid), 0); err == nil && alive(int(pid)) {
		t.Error("process still exists")
	}
	r := collect(t, h.start(t, t.Context(), bash("true")))
	wantCode(t, r.err, connect.CodeUnavailable, "shutting down")
}

func TestH2CIsUsed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, variants[2])
	h.run(t, bash("true"))
	if h.http2.Load() == 0 {
		t.Error("the h2c variant did not speak HTTP/2")
	}
}
