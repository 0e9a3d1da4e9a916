package process

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/warrenhq/warren/proto/process"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name    string
		req     *process.StartRequest
		stdout  string
		stderr  string
		end     *process.ProcessEvent_EndEvent
		maxTime time.Duration
	}{
		{
			name:   "stdout",
			req:    bash("echo hello"),
			stdout: "hello\n",
			end:    &process.ProcessEvent_EndEvent{ExitCode: 0, Exited: true, Status: "exit status 0"},
		},
		{
			name:   "stderr",
			req:    bash("echo oops >&2"),
			stderr: "oops\n",
			end:    &process.ProcessEvent_EndEvent{ExitCode: 0, Exited: true, Status: "exit status 0"},
		},
		{
			name:   "exit code",
			req:    bash("echo partial; exit 3"),
			stdout: "partial\n",
			end:    &process.ProcessEvent_EndEvent{ExitCode: 3, Exited: true, Status: "exit status 3", Error: new("exit status 3")},
		},
		{
			name: "killed by signal",
			req:  bash("kill -9 $$"),
			end:  &process.ProcessEvent_EndEvent{ExitCode: -1, Exited: false, Status: "signal: killed", Error: new("signal: killed")},
		},
		{
			name:   "special characters",
			req:    bash(`printf '%s\n' 'a"b$c\d' "it's" 'ünï€ode'`),
			stdout: "a\"b$c\\d\nit's\nünï€ode\n",
			end:    &process.ProcessEvent_EndEvent{ExitCode: 0, Exited: true, Status: "exit status 0"},
		},
		{
			name: "login shell as the SDK runs it",
			req: &process.StartRequest{
				Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", "echo $((6*7))"}},
				Stdin:   new(false),
			},
			stdout: "42\n",
			end:    &process.ProcessEvent_EndEvent{ExitCode: 0, Exited: true, Status: "exit status 0"},
		},
		{
			name:    "background child holding stdout does not delay the end",
			req:     bash("sleep 5 & echo done"),
			stdout:  "done\n",
			end:     &process.ProcessEvent_EndEvent{ExitCode: 0, Exited: true, Status: "exit status 0"},
			maxTime: 2 * time.Second,
		},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, v)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					begin := time.Now()
					r := h.run(t, tt.req)
					if tt.maxTime > 0 && time.Since(begin) > tt.maxTime {
						t.Errorf("took %v, want under %v", time.Since(begin), tt.maxTime)
					}
					if r.stdout != tt.stdout || r.stderr != tt.stderr {
						t.Errorf("stdout %q stderr %q, want %q and %q", r.stdout, r.stderr, tt.stdout, tt.stderr)
					}
					if diff := cmp.Diff(tt.end, r.end, protocmp.Transform()); diff != "" {
						t.Errorf("end event (-want +got):\n%s", diff)
					}
				})
			}
		})
	}
}

func TestRunLargeOutputIsChunked(t *testing.T) {
	tests := []struct {
		name     string
		script   string
		maxChunk int
	}{
		{"stdout", "head -c 200000 /dev/zero | tr '\\0' a", pipeChunk},
		{"stderr", "head -c 200000 /dev/zero | tr '\\0' a >&2", pipeChunk},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			r := h.run(t, bash(tt.script))
			if got := len(r.stdout) + len(r.stderr); got != 200000 || strings.Trim(r.stdout+r.stderr, "a") != "" {
				t.Errorf("got %d bytes of output, want 200000 x 'a'", got)
			}
			for _, n := range r.chunks {
				if n > tt.maxChunk {
					t.Errorf("data event of %d bytes, want at most %d", n, tt.maxChunk)
				}
			}
		})
	}
}
