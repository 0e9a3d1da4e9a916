package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAgentLogEntry(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		text string
		want LogEntry
	}{
		{"slog json", `{"time":"2025-01-02T03:04:05Z","level":"WARN","msg":"process exited","pid":12,"cmd":"ls"}`,
			LogEntry{Level: "warn", Message: "process exited", Fields: map[string]string{"source": "agent", "pid": "12", "cmd": "ls"}}},
		{"error level with offset", `{"level":"ERROR+2","msg":"boom"}`,
			LogEntry{Level: "error", Message: "boom", Fields: map[string]string{"source": "agent"}}},
		{"debug", `{"level":"DEBUG","msg":"x"}`,
			LogEntry{Level: "debug", Message: "x", Fields: map[string]string{"source": "agent"}}},
		{"plain text", "panic: something",
			LogEntry{Level: "info", Message: "panic: something", Fields: map[string]string{"source": "agent"}}},
		{"json without msg", `{"a":1}`,
			LogEntry{Level: "info", Message: `{"a":1}`, Fields: map[string]string{"source": "agent"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AgentLogEntry("i1", LogLine{Time: at, Stream: "stderr", Text: tt.text})
			tt.want.SandboxID, tt.want.Time = "i1", at
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("AgentLogEntry(%q) (-want +got):\n%s", tt.text, diff)
			}
		})
	}
}
