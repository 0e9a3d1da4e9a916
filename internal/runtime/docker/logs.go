package docker

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Logs reads what a container wrote to stdout and stderr since the given
// time, from the engine's log driver (json-file or local). Sandboxes run
// without a TTY, so the stream is multiplexed and each line carries the
// engine's timestamp.
func (r *Runtime) Logs(ctx context.Context, id string, since time.Time) ([]sandbox.LogLine, error) {
	opts := client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true}
	if !since.IsZero() {
		opts.Since = fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond())
	}
	rc, err := r.cli.ContainerLogs(ctx, id, opts)
	if err != nil {
		return nil, classify(err, "cannot read the sandbox's log")
	}
	defer rc.Close()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, rc); err != nil {
		return nil, classify(err, "cannot read the sandbox's log")
	}
	out := parseLogLines(stdout.Bytes(), "stdout", since)
	out = append(out, parseLogLines(stderr.Bytes(), "stderr", since)...)
	slices.SortStableFunc(out, func(a, b sandbox.LogLine) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// parseLogLines splits "<RFC3339Nano timestamp> <text>" lines, dropping
// any before since (old engine APIs apply since with second precision).
func parseLogLines(b []byte, stream string, since time.Time) []sandbox.LogLine {
	var out []sandbox.LogLine
	for line := range bytes.Lines(b) {
		ts, text, _ := strings.Cut(strings.TrimRight(string(line), "\r\n"), " ")
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || t.Before(since) {
			continue
		}
		out = append(out, sandbox.LogLine{Time: t, Stream: stream, Text: text})
	}
	return out
}
