package docker

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sandbox"
)

func TestLogs(t *testing.T) {
	rt := newTestRuntime(t)
	ctx := t.Context()
	c, err := rt.Create(ctx, testSpec(t, importImage(t, rt)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), c.ID) })
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := waitAgent(waitCtx, c.AgentAddr); err != nil {
		t.Fatal(err)
	}
	write := func(stream, text string) {
		t.Helper()
		res, err := http.Post("http://"+c.AgentAddr+"/log/"+stream, "text/plain", strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	logged := func(since time.Time) []sandbox.LogLine {
		t.Helper()
		lines, err := rt.Logs(ctx, c.ID, since)
		if err != nil {
			t.Fatal(err)
		}
		return lines
	}
	text := func(since time.Time) []string {
		t.Helper()
		var out []string
		for _, l := range logged(since) {
			if l.Time.IsZero() {
				t.Errorf("line %q has no time", l.Text)
			}
			out = append(out, l.Stream+" "+l.Text)
		}
		return out
	}
	// The engine logs what the container writes a moment later, through
	// the shim, and stamps it then: wait for each line to be logged
	// before the next, and take the cut for since from the engine's own
	// stamp, which a loaded machine may put well after the write.
	waitLines := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); len(logged(time.Time{})) < n; {
			if time.Now().After(deadline) {
				t.Fatalf("the engine logged %q, want %d lines", text(time.Time{}), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	write("stderr", `{"level":"INFO","msg":"first"}`+"\n")
	waitLines(1)
	mid := logged(time.Time{})[0].Time.Add(time.Nanosecond)
	write("stdout", "second\n")
	// stdout and stderr reach the engine through separate pipes: lines
	// written at once on both may be logged in either order.
	waitLines(2)
	write("stderr", "third\r\n")
	waitLines(3)

	want := []string{`stderr {"level":"INFO","msg":"first"}`, "stdout second", "stderr third"}
	if diff := cmp.Diff(want, text(time.Time{})); diff != "" {
		t.Errorf("Logs from the start (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[1:], text(mid)); diff != "" {
		t.Errorf("Logs since %v (-want +got):\n%s", mid, diff)
	}
	if _, err := rt.Logs(ctx, "nosuchcontainer", time.Time{}); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("Logs of a missing container: %v, want KindNotFound", err)
	}
}
