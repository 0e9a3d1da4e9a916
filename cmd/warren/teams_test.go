package main

import (
	"io"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/runtime/fake"
)

// TestTeamsSetShow: a quota set from the command line is kept in the
// state dir's store, each limit changed on its own, and shown.
func TestTeamsSetShow(t *testing.T) {
	env := map[string]string{"WARREN_STATE_DIR": t.TempDir()}
	if _, _, err := run(t, env, "teams", "set", "acme", "--max-sandboxes", "2", "--max-creates-per-second", "1.5"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, env, "teams", "set", "acme", "--max-memory-mb", "0", "--max-creates-per-second", "default"); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, env, "teams", "show", "acme")
	if err != nil {
		t.Fatal(err)
	}
	want := "sandboxes 2, vcpus default, memory-mb unlimited, disk-mb default, creates default"
	if !strings.Contains(out, want) {
		t.Errorf("show:\n%s\nwant %q", out, want)
	}
	out, _, err = run(t, env, "teams", "list")
	if err != nil || !strings.Contains(out, "acme") || !strings.Contains(out, "default") {
		t.Errorf("list: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"teams", "set", "acme", "--max-sandboxes", "-1"},
		{"teams", "set", "acme", "--max-vcpus", "1.5"},
		{"teams", "set"},
		{"teams", "drain", "maybe"},
		{"teams", "frobnicate"},
	} {
		if _, _, err := run(t, env, args...); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
	if _, _, err := run(t, env, "teams", "show", "nobody"); err == nil {
		t.Error("show of an unknown team: no error")
	}
}

// TestTeamsThroughURL: set, list and show given --url go through the
// running server as its operator: a new team is made, a limit changed on
// its own, and list and show say what the server counts and the limits
// in effect there (its --team-max-* defaults included).
func TestTeamsThroughURL(t *testing.T) {
	env := map[string]string{"WARREN_STATE_DIR": t.TempDir()}
	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return env[k] }}
	url, stop := startServe(t, m, fake.New("warren/base"), "--team-max-vcpus", "8")
	defer stop()
	if _, _, err := run(t, env, "teams", "set", "acme", "--max-sandboxes", "2", "--url", url); err != nil {
		t.Fatal(err)
	}
	_, says, err := run(t, env, "teams", "set", "acme", "--max-memory-mb", "4096", "--url", url+"/")
	if err != nil || !strings.Contains(says, "sandboxes 2, vcpus default, memory-mb 4096") || !strings.Contains(says, "in effect: sandboxes 2, vcpus 8, memory 4096 MiB") {
		t.Fatalf("set: %v\n%s", err, says)
	}
	out, _, err := run(t, env, "teams", "show", "acme", "--url", url)
	if err != nil || !strings.Contains(out, "acme  0          0      0           0         sandboxes 2, vcpus 8, memory 4096 MiB") {
		t.Errorf("show:\n%s (%v)", out, err)
	}
	out, _, err = run(t, env, "teams", "list", "--url", url)
	if err != nil || !strings.Contains(out, "default") || !strings.Contains(out, "acme") {
		t.Errorf("list:\n%s (%v)", out, err)
	}
	if _, _, err := run(t, env, "teams", "show", "nobody", "--url", url); err == nil {
		t.Error("show of an unknown team: no error")
	}
	if _, _, err := run(t, env, "teams", "list", "--url", "ftp://x"); err == nil {
		t.Error("--url ftp://x accepted")
	}
}
