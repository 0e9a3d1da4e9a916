package main

import (
	"strings"
	"testing"
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
