package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
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
	got := []any{m.Port, m.ServerSecret, stillSet}
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
	m.Port, m.Root, m.LimitGuard = 0, root, false // the test host's processes are not the sandbox's
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

// TestRunCodeInterpreter runs the agent with -code-interpreter in-process
// and executes bash, which needs no kernel package: the code interpreter
// answers on its own port, starts in the default user's home, gets the
// sandbox-wide env vars from the agent, and Close stops it.
func TestRunCodeInterpreter(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash")
	}
	root := image(t, map[string]string{"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "home/user": "dir/"})
	t.Setenv("E2B_SANDBOX", "")
	var logs bytes.Buffer
	m := NewMain(&logs)
	if err := m.ParseFlags([]string{"-code-interpreter", "-port", "0", "-code-interpreter-port", "0"}); err != nil {
		t.Fatal(err)
	}
	m.Root, m.codeInterpreterUser, m.LimitGuard = root, "root", false // no "user" on the test host, nor its processes
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	agent, ci := "http://"+m.Addr().String(), "http://"+m.ci.addr.String()

	resp, err := http.Post(agent+"/init", "application/json", strings.NewReader(`{"envVars":{"SANDBOX_VAR":"from-init"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = http.Get(ci + "/health")
	if err != nil {
		t.Fatal(err)
	}
	health, _ := io.ReadAll(resp.Body)
	resp.Body.Close()

	body := `{"code":"pwd; echo $SANDBOX_VAR $RUN_VAR","language":"bash","env_vars":{"RUN_VAR":"per-run"}}`
	resp, err = http.Post(ci+"/execute", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var stdout, last string
	for line := range strings.Lines(string(stream)) {
		var msg struct{ Type, Text string }
		if err := json.Unmarshal([]byte(line), &msg); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if msg.Type == "stdout" {
			stdout += msg.Text
		}
		last = msg.Type
	}
	got := []string{string(health), resp.Status, stdout, last}
	want := []string{`"OK"`, "200 OK", filepath.Join(root, "home/user") + "\nfrom-init per-run\n", "end_of_execution"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s\nstream:\n%s", diff, stream)
	}

	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := http.Get(ci + "/health"); err == nil {
		t.Error("the code interpreter still answers after Close")
	}
}

// TestRestartKeepsSettings: an agent that its init starts again after the
// first one ended serves with the settings the first one's /init made
// (access token, env vars, default user, server secret), kept in a file
// only root reads.
func TestRestartKeepsSettings(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create the default user")
	}
	root := image(t, map[string]string{"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n"})
	t.Setenv("E2B_SANDBOX", "")
	start := func(restarted bool) *Main {
		m := NewMain(io.Discard)
		m.Port, m.Root, m.LimitGuard, m.ServerSecret, m.Restarted = 0, root, false, "first-secret", restarted
		if err := m.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return m
	}
	first := start(false)
	body := `{"accessToken":"tok","envVars":{"GREETING":"hi"},"defaultUser":"user","agentSecret":"second-secret"}`
	req, _ := http.NewRequest("POST", "http://"+first.Addr().String()+"/init", strings.NewReader(body))
	req.Header.Set("X-Warren-Agent-Secret", "first-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("/init: %s", resp.Status)
	}
	if fi, err := os.Stat(filepath.Join(root, settingsPath)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kept settings: %v, %v; want a file of mode 0600", fi, err)
	}
	first.Close()

	again := start(true)
	defer again.Close()
	get := func(token string) int {
		req, _ := http.NewRequest("GET", "http://"+again.Addr().String()+"/envs", nil)
		if token != "" {
			req.Header.Set("X-Access-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			var envs map[string]string
			if err := json.NewDecoder(resp.Body).Decode(&envs); err != nil || envs["GREETING"] != "hi" {
				t.Errorf("envs %v, %v; want GREETING=hi", envs, err)
			}
		}
		return resp.StatusCode
	}
	got := []any{get(""), get("tok"), again.ServerSecret}
	if diff := cmp.Diff([]any{http.StatusUnauthorized, http.StatusOK, "second-secret"}, got); diff != "" {
		t.Errorf("restarted agent (-want +got):\n%s", diff)
	}

	// A first agent of a new run forgets what an earlier run kept.
	start(false).Close()
	if _, err := os.Stat(filepath.Join(root, settingsPath)); !os.IsNotExist(err) {
		t.Errorf("settings of an earlier run still kept: %v", err)
	}
}
