//go:build e2e

// End to end: commands and terminals.

package e2b_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/sdk/go/e2b"
)

// sandbox/commands/run
func TestE2ERun(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	for name, text := range map[string]string{
		"plain":         "Hello, World!",
		"special chars": "!@#$%^&*()_+",
		"multiline":     "Hello,\nWorld!",
	} {
		res, err := sbx.Commands.Run(ctx, `echo "`+text+`"`, e2b.CommandOptions{})
		if err != nil || res.ExitCode != 0 || res.Stdout != text+"\n" {
			t.Errorf("%s: %+v %v", name, res, err)
		}
	}
	var streamed bytes.Buffer
	res, err := sbx.Commands.Run(ctx, "echo out; echo err >&2; pwd; whoami", e2b.CommandOptions{Stdout: &streamed})
	if err != nil || streamed.String() != res.Stdout || res.Stdout != "out\n/home/user\nuser\n" || res.Stderr != "err\n" {
		t.Errorf("streams: %+v %q %v", res, streamed.String(), err)
	}
	res, err = sbx.Commands.Run(ctx, "pwd; whoami; echo $FOO", e2b.CommandOptions{Cwd: "/tmp", User: "root", Envs: map[string]string{"FOO": "bar"}})
	if err != nil || res.Stdout != "/tmp\nroot\nbar\n" {
		t.Errorf("cwd, user, envs: %+v %v", res, err)
	}
	if _, err := sbx.Commands.Run(ctx, "sleep 1", e2b.CommandOptions{Timeout: 5 * time.Second}); err != nil {
		t.Errorf("a command within its timeout: %v", err)
	}
	if _, err := sbx.Commands.Run(ctx, "sleep 10", e2b.CommandOptions{Timeout: time.Second}); !errors.As(err, new(*e2b.TimeoutError)) {
		t.Errorf("a command past its timeout: %T %v", err, err)
	}
	h, err := sbx.Commands.Start(ctx, "sleep 10", e2b.CommandOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Wait(ctx); !errors.As(err, new(*e2b.TimeoutError)) {
		t.Errorf("waiting on a background command past its timeout: %T %v", err, err)
	}
	_, err = sbx.Commands.Run(ctx, "echo bad >&2; exit 3", e2b.CommandOptions{})
	var exit *e2b.CommandExitError
	if !errors.As(err, &exit) || exit.Result.ExitCode != 3 || exit.Result.Stderr != "bad\n" {
		t.Errorf("exit 3: %T %v", err, err)
	}
	if _, err := sbx.Commands.Run(ctx, "pwd", e2b.CommandOptions{Cwd: "/does/not/exist"}); !errors.As(err, new(*e2b.SandboxError)) {
		t.Errorf("a missing cwd: %T %v", err, err)
	}
}

// sandbox/commands/kill, list, connect
func TestE2EKillListConnect(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	h1, err := sbx.Commands.Start(ctx, "sleep 30", e2b.CommandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h2, err := sbx.Commands.Start(ctx, "sleep 31", e2b.CommandOptions{Tag: "second"})
	if err != nil {
		t.Fatal(err)
	}
	procs, err := sbx.Commands.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]e2b.ProcessInfo{}
	for _, p := range procs {
		seen[p.PID] = p
	}
	if _, ok := seen[h1.PID]; !ok || seen[h2.PID].Tag != "second" || !strings.Contains(strings.Join(seen[h2.PID].Args, " "), "sleep 31") {
		t.Errorf("list = %+v", procs)
	}
	attached, err := sbx.Commands.Connect(ctx, h1.PID, e2b.ConnectCommandOptions{})
	if err != nil || attached.PID != h1.PID {
		t.Fatalf("connect = %v %v", attached, err)
	}
	if killed, err := sbx.Commands.Kill(ctx, h1.PID); !killed || err != nil {
		t.Fatalf("kill = %v %v", killed, err)
	}
	if _, err := attached.Wait(ctx); !errors.As(err, new(*e2b.CommandExitError)) {
		t.Errorf("the attached handle after kill: %T %v", err, err)
	}
	if _, err := sbx.Commands.Run(ctx, fmt.Sprintf("kill -0 %d", h1.PID), e2b.CommandOptions{}); !errors.As(err, new(*e2b.CommandExitError)) {
		t.Errorf("the killed process is still there: %v", err)
	}
	if killed, err := sbx.Commands.Kill(ctx, 999999); killed || err != nil {
		t.Errorf("kill of an unknown pid = %v %v", killed, err)
	}
	if _, err := sbx.Commands.Connect(ctx, 999999, e2b.ConnectCommandOptions{}); err == nil {
		t.Error("connect to an unknown pid succeeded")
	}
	h2.Disconnect()
	if killed, err := sbx.Commands.Kill(ctx, h2.PID); !killed || err != nil {
		t.Errorf("a disconnected command stopped running: kill = %v %v", killed, err)
	}
}

// sandbox/commands/sendStdin
func TestE2ESendStdin(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	text := "Hello, World!\nspecial: !@#$%^&*()\n"
	h, err := sbx.Commands.Start(ctx, "cat", e2b.CommandOptions{Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := sbx.Commands.SendStdin(ctx, h.PID, []byte(text[:14])); err != nil {
		t.Fatal(err)
	}
	if err := h.SendStdin(ctx, []byte(text[14:])); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "cat echoes its input", func() bool { return h.Stdout() == text })
	if err := h.CloseStdin(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := h.Wait(ctx); err != nil || res.Stdout != text {
		t.Errorf("wait = %+v %v", res, err)
	}
}

// sandbox/commands/sandboxKilledDuringRun
func TestE2ESandboxKilledDuringRun(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	h, err := sbx.Commands.Start(ctx, "sleep 60", e2b.CommandOptions{Timeout: e2b.NoTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sbx.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = h.Wait(ctx)
	var te *e2b.TimeoutError
	if !errors.As(err, &te) || !strings.Contains(te.Message, "killed or reached its end of life") {
		t.Errorf("err = %T %v", err, err)
	}
}

// sandbox/pty/ptyCreate, sendInput, resize, kill
func TestE2EPty(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	var out bytes.Buffer // read only after Wait
	h, err := sbx.Pty.Create(ctx, e2b.PtyOptions{Size: e2b.PtySize{Cols: 80, Rows: 24}, Output: &out, Envs: map[string]string{"ABC": "123"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sbx.Pty.Resize(ctx, h.PID, e2b.PtySize{Cols: 123, Rows: 40}); err != nil {
		t.Fatal(err)
	}
	if err := sbx.Pty.SendInput(ctx, h.PID, []byte("echo env=$ABC cols=$(tput cols)\nexit 0\n")); err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(ctx)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("wait = %+v %v", res, err)
	}
	if s := out.String(); !strings.Contains(s, "env=123 cols=123") {
		t.Errorf("terminal output %q", s)
	}
	h2, err := sbx.Pty.Create(ctx, e2b.PtyOptions{Size: e2b.PtySize{Cols: 80, Rows: 24}})
	if err != nil {
		t.Fatal(err)
	}
	if killed, err := sbx.Pty.Kill(ctx, h2.PID); !killed || err != nil {
		t.Errorf("kill = %v %v", killed, err)
	}
	h2.Wait(ctx)
	if killed, err := sbx.Pty.Kill(ctx, h2.PID); killed || err != nil {
		t.Errorf("kill again = %v %v", killed, err)
	}
}

// sandbox/pty/ptyConnect, sandbox/commands/connect after a disconnect, sandbox/files/metadata
func TestE2EReconnectAndMetadata(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	pty, err := sbx.Pty.Create(ctx, e2b.PtyOptions{Size: e2b.PtySize{Cols: 80, Rows: 24}, Timeout: e2b.NoTimeout})
	if err != nil {
		t.Fatal(err)
	}
	pty.Disconnect()
	var out bytes.Buffer // read only after Wait
	again, err := sbx.Pty.Connect(ctx, pty.PID, &out, e2b.NoTimeout)
	if err != nil {
		t.Fatal(err)
	}
	sbx.Pty.SendInput(ctx, pty.PID, []byte("echo reconnected-$((40+2))\nexit\n"))
	if _, err := again.Wait(ctx); err != nil || !strings.Contains(out.String(), "reconnected-42") {
		t.Errorf("reconnected terminal: %v %q", err, out.String())
	}

	h, err := sbx.Commands.Start(ctx, "sleep 1; echo late", e2b.CommandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.Disconnect()
	h2, err := sbx.Commands.Connect(ctx, h.PID, e2b.ConnectCommandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := h2.Wait(ctx); err != nil || res.Stdout != "late\n" {
		t.Errorf("output after reconnecting = %+v %v", res, err)
	}

	if _, err := sbx.Files.Write(ctx, "meta.txt", []byte("m"), e2b.WriteOptions{Metadata: map[string]string{"owner": "go-sdk"}}); err != nil {
		t.Fatal(err)
	}
	if info, err := sbx.Files.GetInfo(ctx, "meta.txt", e2b.FileOptions{}); err != nil || info.Metadata["owner"] != "go-sdk" {
		t.Errorf("metadata = %+v %v", info, err)
	}
}

// sandbox/git: a local repository, a bare remote, branches, commits, push, clone, pull, config
func TestE2EGit(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	g := sbx.Git
	repo, remote, clone := "/tmp/test-git/repo", "/tmp/test-git/remote.git", "/tmp/test-git/clone"
	opts := e2b.GitOptions{}
	must := func(_ *e2b.CommandResult, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(g.Init(ctx, repo, false, "main", opts))
	must(g.Init(ctx, remote, true, "main", opts))
	must(g.ConfigureUser(ctx, "Go SDK", "go@example.test", e2b.GitConfigOptions{Scope: "local", Repo: repo}))
	if v, err := g.GetConfig(ctx, "user.name", e2b.GitConfigOptions{Scope: "local", Repo: repo}); v != "Go SDK" || err != nil {
		t.Errorf("config = %q %v", v, err)
	}
	sbx.Files.Write(ctx, repo+"/README.md", []byte("hello\n"), e2b.WriteOptions{})
	st, err := g.Status(ctx, repo, opts)
	if err != nil || st.CurrentBranch != "main" || len(st.Files) != 1 || st.Files[0].Status != "untracked" {
		t.Fatalf("status = %+v %v", st, err)
	}
	must(g.Add(ctx, repo, nil, opts))
	if st, _ := g.Status(ctx, repo, opts); st.Count(func(f e2b.GitFileStatus) bool { return f.Staged }) != 1 {
		t.Errorf("staged = %+v", st)
	}
	must(g.Commit(ctx, repo, "first", e2b.GitCommitOptions{}))
	if st, _ := g.Status(ctx, repo, opts); !st.IsClean() {
		t.Errorf("after commit = %+v", st)
	}
	must(g.CreateBranch(ctx, repo, "feature", opts))
	br, err := g.Branches(ctx, repo, opts)
	if err != nil || br.CurrentBranch != "feature" || len(br.Branches) != 2 {
		t.Errorf("branches = %+v %v", br, err)
	}
	must(g.CheckoutBranch(ctx, repo, "main", opts))
	must(g.DeleteBranch(ctx, repo, "feature", false, opts))
	if _, err := g.Push(ctx, repo, e2b.GitRemoteOptions{}); err == nil {
		t.Error("a push without a remote succeeded")
	}
	must(g.RemoteAdd(ctx, repo, "origin", remote, false, false, opts))
	must(g.RemoteAdd(ctx, repo, "origin", remote, true, true, opts))
	if u, err := g.RemoteGet(ctx, repo, "origin", opts); u != remote || err != nil {
		t.Errorf("remote = %q %v", u, err)
	}
	if u, _ := g.RemoteGet(ctx, repo, "nope", opts); u != "" {
		t.Errorf("unknown remote = %q", u)
	}
	if _, err := g.Pull(ctx, repo, e2b.GitRemoteOptions{}); !errors.As(err, new(*e2b.GitUpstreamError)) {
		t.Errorf("pull without an upstream: %T %v", err, err)
	}
	must(g.Push(ctx, repo, e2b.GitRemoteOptions{Remote: "origin", Branch: "main"}))
	must(g.Clone(ctx, remote, e2b.GitCloneOptions{Path: clone, Depth: 1}))
	sbx.Files.Write(ctx, repo+"/README.md", []byte("hello again\n"), e2b.WriteOptions{})
	if st, _ := g.Status(ctx, repo, opts); len(st.Files) != 1 || st.Files[0].Status != "modified" || st.Upstream != "origin/main" {
		t.Errorf("modified = %+v", st)
	}
	must(g.Restore(ctx, repo, []string{"README.md"}, false, true, "", opts))
	must(g.Commit(ctx, repo, "second", e2b.GitCommitOptions{AllowEmpty: true, AuthorName: "Other", AuthorEmail: "o@example.test"}))
	must(g.Push(ctx, repo, e2b.GitRemoteOptions{}))
	must(g.Pull(ctx, clone, e2b.GitRemoteOptions{}))
	if res, err := sbx.Commands.Run(ctx, "git -C "+clone+" log --format=%an:%s", e2b.CommandOptions{}); err != nil || res.Stdout != "Other:second\nGo SDK:first\n" {
		t.Errorf("the clone after pull: %+v %v", res, err)
	}
	must(g.Reset(ctx, clone, "hard", "HEAD~1", nil, opts))
	if _, err := g.Reset(ctx, clone, "sideways", "", nil, opts); !errors.As(err, new(*e2b.InvalidArgumentError)) {
		t.Errorf("an unknown reset mode: %v", err)
	}
	must(g.DangerouslyAuthenticate(ctx, "me", "tok", "git.example.test", "", opts))
	if b, err := sbx.Files.Read(ctx, "/home/user/.git-credentials", e2b.ReadOptions{}); err != nil || !strings.Contains(string(b), "https://me:tok@git.example.test") {
		t.Errorf("stored credentials = %q %v", b, err)
	}
}
