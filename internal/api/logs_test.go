package api

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sandbox"
)

// TestLogsMergeAgent checks that both log endpoints return the agent's
// lines (slog JSON or plain) merged in time order with lifecycle events.
func TestLogsMergeAgent(t *testing.T) {
	a := newAPI(t)
	id := a.create(t, map[string]any{"templateID": "base"})["sandboxID"].(string)
	var container string
	for _, c := range a.rt.Containers() {
		if c.SandboxID == id {
			container = c.ID
		}
	}
	if container == "" {
		t.Fatalf("no container for %s in %v", id, a.rt.Containers())
	}
	base := time.Now().Add(time.Second).Truncate(time.Millisecond)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	a.rt.WriteLog(container,
		sandbox.LogLine{Time: at(3), Text: `{"time":"x","level":"ERROR","msg":"process failed","pid":7}`},
		sandbox.LogLine{Time: at(1), Text: `{"time":"x","level":"INFO","msg":"agent listening","addr":":49983"}`},
		sandbox.LogLine{Time: at(2), Stream: "stdout", Text: "plain line"},
		sandbox.LogLine{Time: at(4), Text: `{"level":"WARN","msg":"slow request"}`},
	)
	p := "/sandboxes/" + id + "/logs"
	type entry struct {
		Level, Message string
		Fields         map[string]string
	}
	v2 := func(query string) []string {
		t.Helper()
		r := a.do(t, "GET", "/v2"+p+query, nil)
		if r.status != 200 {
			t.Fatalf("GET v2 logs%s: %d %s", query, r.status, r.body)
		}
		var out struct{ Logs []entry }
		r.decode(t, &out)
		var got []string
		for _, e := range out.Logs {
			got = append(got, e.Level+" "+e.Message)
		}
		return got
	}
	ms := func(s int) string { return fmt.Sprint(at(s).UnixMilli()) }
	tests := []struct {
		name, query string
		want        []string
	}{
		{"all", "", []string{"info sandbox created", "info agent listening", "info plain line", "error process failed", "warn slow request"}},
		{"level warn", "?level=warn", []string{"error process failed", "warn slow request"}},
		{"search", "?search=plain", []string{"info plain line"}},
		{"cursor forward", "?cursor=" + ms(2) + "&limit=2", []string{"info plain line", "error process failed"}},
		{"backward", "?direction=backward&limit=2", []string{"warn slow request", "error process failed"}},
		{"backward from cursor", "?direction=backward&cursor=" + ms(2), []string{"info plain line", "info agent listening", "info sandbox created"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, v2(tt.query)); diff != "" {
				t.Errorf("v2 logs%s (-want +got):\n%s", tt.query, diff)
			}
		})
	}

	t.Run("v1", func(t *testing.T) {
		r := a.do(t, "GET", p+"?start="+ms(1)+"&limit=3", nil)
		var v1 struct {
			Logs []struct {
				Timestamp time.Time
				Line      string
			}
			LogEntries []entry
		}
		r.decode(t, &v1)
		var lines []string
		for _, l := range v1.Logs {
			lines = append(lines, l.Line)
		}
		// Lines are JSON objects as E2B's agent writes them, which the e2b
		// CLI parses.
		wantLines := []string{
			`{"addr":":49983","level":"info","logger":"agent","message":"agent listening"}`,
			`{"level":"info","logger":"agent","message":"plain line"}`,
			`{"level":"error","logger":"agent","message":"process failed","pid":"7"}`,
		}
		if diff := cmp.Diff(wantLines, lines); diff != "" {
			t.Errorf("v1 lines (-want +got):\n%s", diff)
		}
		if len(v1.Logs) > 0 && !v1.Logs[0].Timestamp.Equal(at(1)) {
			t.Errorf("v1 first timestamp %v, want %v", v1.Logs[0].Timestamp, at(1))
		}
		want := map[string]string{"source": "agent", "pid": "7"}
		if len(v1.LogEntries) != 3 || !cmp.Equal(v1.LogEntries[2].Fields, want) {
			t.Errorf("v1 entries %+v, want the third with fields %v", v1.LogEntries, want)
		}
	})

	t.Run("container gone", func(t *testing.T) {
		a.do(t, "DELETE", "/sandboxes/"+id, nil)
		got := v2("")
		if len(got) < 2 || got[0] != "info sandbox created" || got[len(got)-1] != "info sandbox killed" {
			t.Errorf("after kill: %v, want the lifecycle events only", got)
		}
	})
}
