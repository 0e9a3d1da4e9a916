package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseFlags(t *testing.T) {
	t.Setenv(secretEnv, "s3cret")
	m := NewMain(&bytes.Buffer{})
	if err := m.ParseFlags([]string{"-port", "1234"}); err != nil {
		t.Fatal(err)
	}
	_, stillSet := os.LookupEnv(secretEnv)
	got := []any{m.Port, m.TunnelSecret, stillSet}
	if diff := cmp.Diff([]any{1234, "s3cret", false}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	for _, args := range [][]string{{"-port", "70000"}, {"extra"}, {"-nope"}} {
		var stderr bytes.Buffer
		if err := NewMain(&stderr).ParseFlags(args); err == nil || stderr.Len() == 0 {
			t.Errorf("ParseFlags(%q) = %v, stderr %q", args, err, stderr.String())
		}
	}
}

// TestRun runs the whole agent in-process on a free port with a fake
// image root.
func TestRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create the default user")
	}
	root := image(t, map[string]string{"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n"})
	t.Setenv("E2B_SANDBOX", "") // restored after the test; Run sets it
	var logs bytes.Buffer
	m := NewMain(&logs)
	m.Port, m.Root = 0, root
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}

	resp, err := http.Get("http://" + m.Addr().String() + "/health")
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	resp.Body.Close()
	got := []string{
		resp.Status,
		read(t, filepath.Join(root, "run/e2b/.E2B_SANDBOX")),
		os.Getenv("E2B_SANDBOX"),
		strings.SplitN(read(t, filepath.Join(root, "etc/passwd")), "\n", 3)[1],
	}
	want := []string{"204 No Content", "true", "true", "user:x:1000:1000::/home/user:/bin/sh"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !strings.Contains(logs.String(), `"msg":"agent listening"`) {
		t.Errorf("logs are not JSON lines:\n%s", logs.String())
	}
}
