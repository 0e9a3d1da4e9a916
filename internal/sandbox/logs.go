package sandbox

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// logLevels are E2B's four log levels, least severe first.
var logLevels = []string{"debug", "info", "warn", "error"}

// LogLevelRank ranks one of E2B's log levels, from debug (0) to error (3),
// for filters by minimum level; ok reports whether level is one of them.
// Any other string ranks as debug.
func LogLevelRank(level string) (rank int, ok bool) {
	i := slices.Index(logLevels, level)
	return max(i, 0), i >= 0
}

// LogLine is one line a container wrote to its stdout or stderr, as the
// engine recorded it.
type LogLine struct {
	Time   time.Time // when the engine received it
	Stream string    // "stdout" or "stderr"
	Text   string    // without the trailing newline
}

// AgentLogEntry turns a line of the agent's output into a log entry. The
// agent logs slog JSON lines; their level, message and attributes become
// the entry's, and Fields["source"] is "agent". Any other line is an info
// entry whose message is the line.
func AgentLogEntry(sandboxID string, l LogLine) LogEntry {
	e := LogEntry{SandboxID: sandboxID, Time: l.Time, Level: "info", Message: l.Text,
		Fields: map[string]string{"source": "agent"}}
	var rec map[string]any
	if !strings.HasPrefix(l.Text, "{") || json.Unmarshal([]byte(l.Text), &rec) != nil {
		return e
	}
	msg, ok := rec["msg"].(string)
	if !ok {
		return e
	}
	e.Message = msg
	if lv, ok := rec["level"].(string); ok {
		e.Level = slogLevel(lv)
	}
	for k, v := range rec {
		switch k {
		case "msg", "level", "time":
			continue
		}
		if s, ok := v.(string); ok {
			e.Fields[k] = s
		} else if b, err := json.Marshal(v); err == nil {
			e.Fields[k] = string(b)
		} else {
			e.Fields[k] = fmt.Sprint(v)
		}
	}
	return e
}

// slogLevel maps slog's level names ("INFO", "WARN+2", "DEBUG-4") to the
// four E2B levels.
func slogLevel(s string) string {
	s = strings.ToUpper(s)
	switch {
	case strings.HasPrefix(s, "ERROR"):
		return "error"
	case strings.HasPrefix(s, "WARN"):
		return "warn"
	case strings.HasPrefix(s, "DEBUG"):
		return "debug"
	}
	return "info"
}
