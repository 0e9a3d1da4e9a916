//go:build e2e

// The end-to-end suite: the SDK against a real server, configured from E2B_API_URL,
// E2B_SANDBOX_URL, E2B_DOMAIN and E2B_API_KEY (sdk/go/e2e.sh starts a Warren server and runs
// it: go test -tags e2e). Its cases follow the official JavaScript SDK's own tests of the same
// calls, written anew for Go. Without a server it skips, or fails when CI is set.
package e2b_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/sdk/go/e2b"
)

const e2eTemplate = "base"

func e2eClient(t *testing.T) *e2b.Client {
	t.Helper()
	if os.Getenv("E2B_API_URL") == "" || os.Getenv("E2B_API_KEY") == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but no server is given: set E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (sdk/go/e2e.sh starts one)")
		}
		t.Skip("no server: set E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY, or run sdk/go/e2e.sh")
	}
	return e2b.NewClient()
}

// e2eSandbox creates a sandbox for one test, tagged with the test's name, and kills it after.
func e2eSandbox(t *testing.T, opts e2b.SandboxOptions) (*e2b.Client, *e2b.Sandbox) {
	t.Helper()
	c := e2eClient(t)
	if opts.Template == "" {
		opts.Template = e2eTemplate
	}
	if opts.Metadata == nil {
		opts.Metadata = map[string]string{"sandboxTestId": fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())}
	}
	sbx, err := c.Create(context.Background(), opts)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { sbx.Kill(context.Background()) })
	return c, sbx
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func listed(t *testing.T, c *e2b.Client, opts e2b.ListOptions, id string) bool {
	t.Helper()
	all, err := c.List(opts).All(ctxT(t))
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	for _, s := range all {
		if s.SandboxID == id {
			return true
		}
	}
	return false
}

// api/info, api/kill, sandbox/create, sandbox/kill
func TestE2ECreateInfoListKill(t *testing.T) {
	t.Parallel()
	c, sbx := e2eSandbox(t, e2b.SandboxOptions{Metadata: map[string]string{"test-key": "test-value-" + t.Name()}})
	ctx := ctxT(t)
	if ok, err := sbx.IsRunning(ctx); !ok || err != nil {
		t.Fatalf("isRunning = %v %v", ok, err)
	}
	info, err := sbx.GetInfo(ctx)
	if err != nil || info.SandboxID != sbx.ID || info.State != e2b.StateRunning || info.Metadata["test-key"] != "test-value-"+t.Name() {
		t.Fatalf("info = %+v %v", info, err)
	}
	byMeta := e2b.ListOptions{Metadata: map[string]string{"test-key": "test-value-" + t.Name()}}
	if !listed(t, c, byMeta, sbx.ID) {
		t.Error("not listed by its metadata")
	}
	if killed, err := sbx.Kill(ctx); !killed || err != nil {
		t.Fatalf("kill = %v %v", killed, err)
	}
	if listed(t, c, byMeta, sbx.ID) {
		t.Error("listed after kill")
	}
	if killed, err := c.Kill(ctx, "nonexistingsandbox"); killed || err != nil {
		t.Errorf("kill of an unknown sandbox = %v %v", killed, err)
	}
	if _, err := c.GetInfo(ctx, sbx.ID); !errors.As(err, new(*e2b.SandboxNotFoundError)) {
		t.Errorf("info after kill: %T %v", err, err)
	}
}

// api/list: pagination, state filter
func TestE2EListPagesAndStates(t *testing.T) {
	t.Parallel()
	tag := map[string]string{"list": fmt.Sprint(time.Now().UnixNano())}
	c, a := e2eSandbox(t, e2b.SandboxOptions{Metadata: tag})
	_, b := e2eSandbox(t, e2b.SandboxOptions{Metadata: tag})
	ctx := ctxT(t)
	p := c.List(e2b.ListOptions{Metadata: tag, Limit: 1})
	first, err := p.NextItems(ctx)
	if err != nil || len(first) != 1 || !p.HasNext() || p.NextToken() == "" {
		t.Fatalf("first page %v %v, more %v", first, err, p.HasNext())
	}
	second, err := p.NextItems(ctx)
	if err != nil || len(second) != 1 || second[0].SandboxID == first[0].SandboxID {
		t.Fatalf("second page %v %v", second, err)
	}
	if paused, err := b.Pause(ctx, e2b.PauseOptions{}); !paused || err != nil {
		t.Fatalf("pause = %v %v", paused, err)
	}
	pausedOnly := e2b.ListOptions{Metadata: tag, States: []e2b.SandboxState{e2b.StatePaused}}
	runningOnly := e2b.ListOptions{Metadata: tag, States: []e2b.SandboxState{e2b.StateRunning}}
	if !listed(t, c, pausedOnly, b.ID) || listed(t, c, pausedOnly, a.ID) || !listed(t, c, runningOnly, a.ID) || listed(t, c, runningOnly, b.ID) {
		t.Error("the state filter does not separate running and paused")
	}
}

// api/snapshot, sandbox/connect, sandbox/snapshot
func TestE2EPauseAndConnect(t *testing.T) {
	t.Parallel()
	c, sbx := e2eSandbox(t, e2b.SandboxOptions{Envs: map[string]string{"KEPT": "yes"}})
	ctx := ctxT(t)
	if _, err := sbx.Files.Write(ctx, "/home/user/kept.txt", []byte("still here"), e2b.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if paused, err := sbx.Pause(ctx, e2b.PauseOptions{}); !paused || err != nil {
		t.Fatalf("pause = %v %v", paused, err)
	}
	if running, err := sbx.IsRunning(ctx); running || err != nil {
		t.Errorf("isRunning while paused = %v %v", running, err)
	}
	if paused, err := sbx.Pause(ctx, e2b.PauseOptions{}); paused || err != nil {
		t.Errorf("pause of a paused sandbox = %v %v", paused, err)
	}
	again, err := c.Connect(ctx, sbx.ID, e2b.ConnectOptions{})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if running, err := again.IsRunning(ctx); !running || err != nil {
		t.Errorf("isRunning after connect = %v %v", running, err)
	}
	if b, err := again.Files.Read(ctx, "/home/user/kept.txt", e2b.ReadOptions{}); string(b) != "still here" || err != nil {
		t.Errorf("file after resume = %q %v", b, err)
	}
	if res, err := again.Commands.Run(ctx, "echo $KEPT", e2b.CommandOptions{}); err != nil || res.Stdout != "yes\n" {
		t.Errorf("env after resume = %+v %v", res, err)
	}
	sbx.Kill(ctx)
	if _, err := c.Connect(ctx, sbx.ID, e2b.ConnectOptions{}); !errors.As(err, new(*e2b.SandboxNotFoundError)) {
		t.Errorf("connect to a killed sandbox: %T %v", err, err)
	}
}

// sandbox/timeout, sandbox/connect (never shortens)
func TestE2ETimeouts(t *testing.T) {
	t.Parallel()
	c, sbx := e2eSandbox(t, e2b.SandboxOptions{Timeout: 10 * time.Minute})
	ctx := ctxT(t)
	before, err := sbx.GetInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Connect(ctx, sbx.ID, e2b.ConnectOptions{Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	after, _ := sbx.GetInfo(ctx)
	if after.EndAt.Before(before.EndAt) {
		t.Errorf("connect shortened the sandbox's life: %v → %v", before.EndAt, after.EndAt)
	}
	if err := sbx.SetTimeout(ctx, 20*time.Minute); err != nil {
		t.Fatal(err)
	}
	longer, _ := sbx.GetInfo(ctx)
	if !longer.EndAt.After(after.EndAt) {
		t.Errorf("setTimeout did not lengthen: %v → %v", after.EndAt, longer.EndAt)
	}
	if err := sbx.SetTimeout(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the sandbox ends at its shortened timeout", func() bool {
		running, err := sbx.IsRunning(ctx)
		return err == nil && !running
	})
}

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

// sandbox/files/write, read, exists, remove, info, contentEncoding
func TestE2EFilesReadWrite(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	info, err := sbx.Files.Write(ctx, "test_write.txt", []byte("This is a test file."), e2b.WriteOptions{})
	if err != nil || info.Path != "/home/user/test_write.txt" || info.Name != "test_write.txt" || info.Type != e2b.FileTypeFile {
		t.Fatalf("write = %+v %v", info, err)
	}
	if ok, err := sbx.Files.Exists(ctx, "test_write.txt", e2b.FileOptions{}); !ok || err != nil {
		t.Errorf("exists = %v %v", ok, err)
	}
	if b, err := sbx.Files.Read(ctx, "test_write.txt", e2b.ReadOptions{}); string(b) != "This is a test file." || err != nil {
		t.Errorf("read = %q %v", b, err)
	}
	sbx.Files.Write(ctx, "test_write.txt", []byte("New"), e2b.WriteOptions{})
	if b, _ := sbx.Files.Read(ctx, "test_write.txt", e2b.ReadOptions{}); string(b) != "New" {
		t.Errorf("overwritten = %q", b)
	}
	stat, err := sbx.Files.GetInfo(ctx, "/home/user/test_write.txt", e2b.FileOptions{})
	if err != nil || stat.Size != 3 || stat.Mode != 0o644 || stat.Permissions != "-rw-r--r--" || stat.Owner != "user" || stat.Group != "user" || stat.ModTime.IsZero() {
		t.Errorf("info = %+v %v", stat, err)
	}
	if err := sbx.Files.Remove(ctx, "test_write.txt", e2b.FileOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := sbx.Files.Exists(ctx, "test_write.txt", e2b.FileOptions{}); ok || err != nil {
		t.Errorf("exists after remove = %v %v", ok, err)
	}
	if err := sbx.Files.Remove(ctx, "never-there", e2b.FileOptions{}); err != nil {
		t.Errorf("remove of a missing path: %v", err)
	}
	if _, err := sbx.Files.Read(ctx, "missing.txt", e2b.ReadOptions{}); !errors.As(err, new(*e2b.FileNotFoundError)) {
		t.Errorf("read of a missing file: %T %v", err, err)
	}
	if _, err := sbx.Files.GetInfo(ctx, "missing.txt", e2b.FileOptions{}); !errors.As(err, new(*e2b.FileNotFoundError)) {
		t.Errorf("info of a missing file: %T %v", err, err)
	}

	// Empty files, gzip both ways, streams.
	if _, err := sbx.Files.Write(ctx, "empty.txt", nil, e2b.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, err := sbx.Files.Read(ctx, "empty.txt", e2b.ReadOptions{}); len(b) != 0 || err != nil {
		t.Errorf("empty = %q %v", b, err)
	}
	big := strings.Repeat("compressible line\n", 20000)
	for _, gz := range []struct{ up, down bool }{{true, false}, {false, true}, {true, true}} {
		if _, err := sbx.Files.WriteStream(ctx, "big.txt", strings.NewReader(big), e2b.WriteOptions{Gzip: gz.up}); err != nil {
			t.Fatal(err)
		}
		r, err := sbx.Files.ReadStream(ctx, "big.txt", e2b.ReadOptions{Gzip: gz.down})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if string(b) != big || err != nil {
			t.Errorf("gzip %+v: %d bytes back, %v", gz, len(b), err)
		}
	}
	if _, err := sbx.Files.Write(ctx, "/root/root.txt", []byte("r"), e2b.WriteOptions{User: "root"}); err != nil {
		t.Fatal(err)
	}
	if st, err := sbx.Files.GetInfo(ctx, "/root/root.txt", e2b.FileOptions{User: "root"}); err != nil || st.Owner != "root" {
		t.Errorf("as root = %+v %v", st, err)
	}
}

// sandbox/files/write (write many)
func TestE2EWriteFiles(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	if infos, err := sbx.Files.WriteFiles(ctx, nil, e2b.WriteOptions{}); len(infos) != 0 || err != nil {
		t.Errorf("no files = %v %v", infos, err)
	}
	entries := []e2b.WriteEntry{
		{Path: "multi/one.txt", Data: strings.NewReader("one")},
		{Path: "/tmp/multi/two.txt", Data: strings.NewReader("two")},
		{Path: "three.txt", Data: strings.NewReader("three")},
	}
	infos, err := sbx.Files.WriteFiles(ctx, entries, e2b.WriteOptions{})
	if err != nil || len(infos) != 3 {
		t.Fatalf("write files = %+v %v", infos, err)
	}
	want := map[string]string{"/home/user/multi/one.txt": "one", "/tmp/multi/two.txt": "two", "/home/user/three.txt": "three"}
	for i, info := range infos {
		if _, ok := want[info.Path]; !ok {
			t.Errorf("info %d: %+v", i, info)
			continue
		}
		if b, err := sbx.Files.Read(ctx, info.Path, e2b.ReadOptions{}); string(b) != want[info.Path] || err != nil {
			t.Errorf("%s = %q %v", info.Path, b, err)
		}
	}
}

// sandbox/files/list, makeDir, rename
func TestE2EListMakeDirRename(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	parent := "test_directory"
	for _, d := range []string{"", "/subdir1", "/subdir2", "/subdir1/subdir1_1", "/subdir1/subdir1_2", "/subdir2/subdir2_1", "/subdir2/subdir2_2"} {
		if made, err := sbx.Files.MakeDir(ctx, parent+d, e2b.FileOptions{}); !made || err != nil {
			t.Fatalf("makeDir %s = %v %v", d, made, err)
		}
	}
	if made, err := sbx.Files.MakeDir(ctx, parent, e2b.FileOptions{}); made || err != nil {
		t.Errorf("makeDir of an existing dir = %v %v", made, err)
	}
	sbx.Files.Write(ctx, parent+"/file1.txt", []byte("Hello, world!"), e2b.WriteOptions{})
	for _, tc := range []struct {
		depth int
		names []string
	}{
		{0, []string{"file1.txt", "subdir1", "subdir2"}},
		{1, []string{"file1.txt", "subdir1", "subdir2"}},
		{2, []string{"file1.txt", "subdir1", "subdir1_1", "subdir1_2", "subdir2", "subdir2_1", "subdir2_2"}},
	} {
		got, err := sbx.Files.List(ctx, parent, e2b.ListDirOptions{Depth: tc.depth})
		var names []string
		for _, e := range got {
			names = append(names, e.Name)
		}
		if err != nil || strings.Join(names, ",") != strings.Join(tc.names, ",") || got[0].Type != e2b.FileTypeFile || got[1].Type != e2b.FileTypeDir || got[0].Path != "/home/user/"+parent+"/file1.txt" {
			t.Errorf("depth %d: %v %v", tc.depth, names, err)
		}
	}
	if _, err := sbx.Files.List(ctx, parent, e2b.ListDirOptions{Depth: -1}); !errors.As(err, new(*e2b.InvalidArgumentError)) {
		t.Errorf("depth -1: %v", err)
	}
	moved, err := sbx.Files.Rename(ctx, parent+"/file1.txt", parent+"/deeper/renamed.txt", e2b.FileOptions{})
	if err != nil || moved.Path != "/home/user/"+parent+"/deeper/renamed.txt" || moved.Name != "renamed.txt" {
		t.Fatalf("rename = %+v %v", moved, err)
	}
	if ok, _ := sbx.Files.Exists(ctx, parent+"/file1.txt", e2b.FileOptions{}); ok {
		t.Error("the old path still exists")
	}
	if _, err := sbx.Files.Rename(ctx, "nope", "nope2", e2b.FileOptions{}); !errors.As(err, new(*e2b.FileNotFoundError)) {
		t.Errorf("rename of a missing path: %T %v", err, err)
	}
	if _, err := sbx.Files.List(ctx, "no_such_dir", e2b.ListDirOptions{}); !errors.As(err, new(*e2b.FileNotFoundError)) {
		t.Errorf("list of a missing dir: %T %v", err, err)
	}
}

// sandbox/files/signing
func TestE2ESignedURLs(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	sbx.Files.Write(ctx, "hello.txt", []byte("hello world"), e2b.WriteOptions{})
	get := func(u string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		route(req, sbx)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	u, err := sbx.DownloadURL("hello.txt", e2b.URLOptions{Expires: 10000 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(u); code != 200 || body != "hello world" {
		t.Errorf("valid signature: %d %s", code, body)
	}
	u, _ = sbx.DownloadURL("hello.txt", e2b.URLOptions{Expires: -10000 * time.Second})
	if code, body := get(u); code != 401 || !strings.Contains(body, "signature is already expired") {
		t.Errorf("expired signature: %d %s", code, body)
	}
	u, _ = sbx.UploadURL("/home/user/uploaded.txt", e2b.URLOptions{})
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	part, _ := mw.CreateFormFile("file", "uploaded.txt")
	part.Write([]byte("up"))
	mw.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, &form)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	route(req, sbx)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("signed upload: %v %v", res, err)
	}
	res.Body.Close()
	if b, err := sbx.Files.Read(ctx, "uploaded.txt", e2b.ReadOptions{}); string(b) != "up" || err != nil {
		t.Errorf("uploaded = %q %v", b, err)
	}
}

// route adds the routing headers a shared sandbox URL (E2B_SANDBOX_URL) needs; a URL of the
// sandbox's own host needs none.
func route(req *http.Request, sbx *e2b.Sandbox) {
	req.Header.Set("E2b-Sandbox-Id", sbx.ID)
	req.Header.Set("E2b-Sandbox-Port", "49983")
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

// sandbox/snapshot-api
func TestE2ESnapshots(t *testing.T) {
	t.Parallel()
	c, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	sbx.Files.Write(ctx, "/home/user/snap.txt", []byte("snapshotted"), e2b.WriteOptions{})
	snap, err := sbx.CreateSnapshot(ctx, "")
	if err != nil {
		t.Fatalf("create snapshot: %v", err)
	}
	t.Cleanup(func() { c.DeleteSnapshot(context.Background(), snap.SnapshotID) })
	all, err := sbx.ListSnapshots(e2b.SnapshotListOptions{}).All(ctx)
	if err != nil || len(all) != 1 || all[0].SnapshotID != snap.SnapshotID {
		t.Errorf("snapshots of the sandbox = %+v %v", all, err)
	}
	_, from := e2eSandbox(t, e2b.SandboxOptions{Template: snap.SnapshotID})
	if b, err := from.Files.Read(ctx, "/home/user/snap.txt", e2b.ReadOptions{}); string(b) != "snapshotted" || err != nil {
		t.Errorf("file in a sandbox from the snapshot = %q %v", b, err)
	}
	if deleted, err := c.DeleteSnapshot(ctx, snap.SnapshotID); !deleted || err != nil {
		t.Errorf("delete = %v %v", deleted, err)
	}
	if deleted, err := c.DeleteSnapshot(ctx, snap.SnapshotID); deleted || err != nil {
		t.Errorf("delete again = %v %v", deleted, err)
	}
}

// sandbox/fork
func TestE2EFork(t *testing.T) {
	t.Parallel()
	c, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	sbx.Files.Write(ctx, "/home/user/fork.txt", []byte("original"), e2b.WriteOptions{})
	forks, err := sbx.Fork(ctx, e2b.ForkOptions{})
	if err != nil || len(forks) != 1 || forks[0].Err != nil {
		t.Fatalf("fork = %+v %v", forks, err)
	}
	child := forks[0].Sandbox
	t.Cleanup(func() { child.Kill(context.Background()) })
	if b, err := child.Files.Read(ctx, "/home/user/fork.txt", e2b.ReadOptions{}); string(b) != "original" || err != nil {
		t.Errorf("file in the fork = %q %v", b, err)
	}
	child.Files.Write(ctx, "/home/user/fork.txt", []byte("changed"), e2b.WriteOptions{})
	if b, _ := sbx.Files.Read(ctx, "/home/user/fork.txt", e2b.ReadOptions{}); string(b) != "original" {
		t.Errorf("the fork changed its parent: %q", b)
	}
	if _, err := c.Fork(ctx, "nonexistingsandbox", e2b.ForkOptions{}); !errors.As(err, new(*e2b.SandboxNotFoundError)) {
		t.Errorf("fork of an unknown sandbox: %T %v", err, err)
	}
}

// sandbox/metrics
func TestE2EMetrics(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	var m []e2b.SandboxMetrics
	eventually(t, 30*time.Second, "metrics appear", func() bool {
		var err error
		m, err = sbx.GetMetrics(ctx, e2b.MetricsOptions{})
		return err == nil && len(m) > 0
	})
	if m[0].CPUCount == 0 || m[0].MemTotal == 0 || m[0].Timestamp.IsZero() {
		t.Errorf("metric %+v", m[0])
	}
	old, err := sbx.GetMetrics(ctx, e2b.MetricsOptions{Start: time.Now().Add(-2 * time.Hour), End: time.Now().Add(-time.Hour)})
	if err != nil || len(old) != 0 {
		t.Errorf("metrics of an hour before the sandbox = %v %v", old, err)
	}
}

// sandbox/files/watch
func TestE2EWatchDir(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	sbx.Files.MakeDir(ctx, "watched/sub", e2b.FileOptions{})
	w, err := sbx.Files.WatchDir(ctx, "watched", e2b.WatchOptions{Recursive: true, IncludeEntry: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sbx.Files.Write(ctx, "watched/sub/file.txt", []byte("changed"), e2b.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(20 * time.Second)
	for seen := false; !seen; {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("the watch ended: %v", w.Err())
			}
			if ev.Name == "sub/file.txt" && ev.Type == e2b.EventWrite {
				seen = true
				if ev.Entry == nil || ev.Entry.Path != "/home/user/watched/sub/file.txt" {
					t.Errorf("entry %+v", ev.Entry)
				}
			}
		case <-timeout:
			t.Fatal("no write event for sub/file.txt")
		}
	}
	w.Stop()
	for range w.Events() {
	}
	if w.Err() != nil {
		t.Errorf("err after stop: %v", w.Err())
	}
	if _, err := sbx.Files.WatchDir(ctx, "no_such_dir", e2b.WatchOptions{}); !errors.As(err, new(*e2b.FileNotFoundError)) {
		t.Errorf("watch of a missing dir: %T %v", err, err)
	}
	sbx.Files.Write(ctx, "plain.txt", []byte("x"), e2b.WriteOptions{})
	if _, err := sbx.Files.WatchDir(ctx, "plain.txt", e2b.WatchOptions{}); !errors.As(err, new(*e2b.SandboxError)) {
		t.Errorf("watch of a file: %T %v", err, err)
	}
}

// code-interpreter: basic, statefulness, executionCount, callbacks, contexts, env vars, errors
func TestE2ERunCode(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{Template: e2b.CodeInterpreterTemplate})
	ctx := ctxT(t)
	exec, err := sbx.RunCode(ctx, "x = 1; x", e2b.RunCodeOptions{})
	if err != nil || exec.Text() != "1" || exec.Error != nil {
		t.Fatalf("x = 1; x: %+v %v", exec, err)
	}
	var stdout []string
	var results []e2b.Result
	exec, err = sbx.RunCode(ctx, "print('hello'); x + 1", e2b.RunCodeOptions{
		OnStdout: func(m e2b.OutputMessage) { stdout = append(stdout, m.Line) },
		OnResult: func(r e2b.Result) { results = append(results, r) },
	})
	if err != nil || exec.Text() != "2" || strings.Join(stdout, "") != "hello\n" || len(results) != 1 || exec.ExecutionCount < 2 {
		t.Errorf("state and callbacks: %+v %v %q %d", exec, err, stdout, len(results))
	}
	exec, err = sbx.RunCode(ctx, "import os; os.environ['FOO']", e2b.RunCodeOptions{Envs: map[string]string{"FOO": "bar"}})
	if err != nil || exec.Text() != "bar" {
		t.Errorf("env vars: %+v %v", exec, err)
	}
	exec, err = sbx.RunCode(ctx, "1/0", e2b.RunCodeOptions{})
	if err != nil || exec.Error == nil || exec.Error.Name != "ZeroDivisionError" {
		t.Errorf("an error of the code: %+v %v", exec, err)
	}
	cc, err := sbx.CreateCodeContext(ctx, e2b.CodeContextOptions{Cwd: "/tmp"})
	if err != nil || cc.ID == "" || cc.Language != "python" || cc.Cwd != "/tmp" {
		t.Fatalf("create context: %+v %v", cc, err)
	}
	exec, err = sbx.RunCode(ctx, "import os; os.getcwd()", e2b.RunCodeOptions{Context: cc})
	if err != nil || exec.Text() != "/tmp" {
		t.Errorf("cwd of the context: %+v %v", exec, err)
	}
	if exec, _ := sbx.RunCode(ctx, "x", e2b.RunCodeOptions{Context: cc}); exec == nil || exec.Error == nil || exec.Error.Name != "NameError" {
		t.Errorf("contexts share state: %+v", exec)
	}
	if _, err := sbx.RunCode(ctx, "1", e2b.RunCodeOptions{Context: cc, Language: "python"}); !errors.As(err, new(*e2b.InvalidArgumentError)) {
		t.Errorf("context and language: %v", err)
	}
	list, err := sbx.ListCodeContexts(ctx)
	found := false
	for _, c := range list {
		found = found || c.ID == cc.ID
	}
	if err != nil || !found {
		t.Errorf("list contexts: %+v %v", list, err)
	}
	if err := sbx.RestartCodeContext(ctx, cc.ID); err != nil {
		t.Errorf("restart: %v", err)
	}
	if err := sbx.RemoveCodeContext(ctx, cc.ID); err != nil {
		t.Errorf("remove: %v", err)
	}
	if _, err := sbx.RunCode(ctx, "1", e2b.RunCodeOptions{Context: cc}); !errors.As(err, new(*e2b.NotFoundError)) {
		t.Errorf("a removed context: %T %v", err, err)
	}
	if exec, err := sbx.RunCode(ctx, "echo $((6*7))", e2b.RunCodeOptions{Language: "bash"}); err != nil || strings.Join(exec.Logs.Stdout, "") != "42\n" {
		t.Errorf("bash: %+v %v", exec, err)
	}
}

// secret/secret
func TestE2ESecrets(t *testing.T) {
	t.Parallel()
	c := e2eClient(t)
	ctx := ctxT(t)
	name := fmt.Sprintf("go_sdk_%d", time.Now().UnixNano())
	s, err := c.CreateSecret(ctx, name, "s3cret", map[string]string{"owner": "go"})
	if err != nil || s.SecretID == "" || s.Name != name || s.Metadata["owner"] != "go" || s.Version < 1 {
		t.Fatalf("create = %+v %v", s, err)
	}
	t.Cleanup(func() { c.DestroySecret(context.Background(), s.SecretID) })
	if got, err := c.GetSecret(ctx, name); err != nil || got.SecretID != s.SecretID {
		t.Errorf("get by name = %+v %v", got, err)
	}
	up, err := c.UpdateSecret(ctx, s.SecretID, "n3w", nil)
	if err != nil || up.Version <= s.Version {
		t.Errorf("update = %+v %v", up, err)
	}
	all, err := c.ListSecrets(e2b.SecretListOptions{Limit: 1}).All(ctx)
	found := false
	for _, x := range all {
		found = found || x.SecretID == s.SecretID
	}
	if err != nil || !found {
		t.Errorf("list = %+v %v", all, err)
	}
	if ok, err := c.SecretExists(ctx, name); !ok || err != nil {
		t.Errorf("exists = %v %v", ok, err)
	}
	if ok, err := c.DestroySecret(ctx, name); !ok || err != nil {
		t.Errorf("destroy = %v %v", ok, err)
	}
	if ok, err := c.DestroySecret(ctx, s.SecretID); ok || err != nil {
		t.Errorf("destroy again = %v %v", ok, err)
	}
	if ok, err := c.SecretExists(ctx, name); ok || err != nil {
		t.Errorf("exists after destroy = %v %v", ok, err)
	}
	if _, err := c.UpdateSecret(ctx, name, "v", nil); !errors.As(err, new(*e2b.SecretNotFoundError)) || !errors.As(err, new(*e2b.SecretError)) {
		t.Errorf("update of a destroyed secret: %T %v", err, err)
	}
}

// volume/volume, volume/file (against the real content API rather than mocks)
func TestE2EVolumes(t *testing.T) {
	t.Parallel()
	c := e2eClient(t)
	ctx := ctxT(t)
	name := fmt.Sprintf("go-sdk-%d", time.Now().UnixNano())
	vol, err := c.CreateVolume(ctx, name)
	if err != nil || vol.VolumeID == "" || vol.Name != name || vol.Token == "" {
		t.Fatalf("create = %+v %v", vol, err)
	}
	t.Cleanup(func() { c.DestroyVolume(context.Background(), vol.VolumeID) })
	if _, err := c.CreateVolume(ctx, "bad name!"); !errors.As(err, new(*e2b.VolumeError)) {
		t.Errorf("an invalid name: %T %v", err, err)
	}
	list, err := c.ListVolumes(ctx)
	found := false
	for _, v := range list {
		found = found || v.VolumeID == vol.VolumeID
	}
	if err != nil || !found {
		t.Errorf("list = %+v %v", list, err)
	}
	again, err := c.ConnectVolume(ctx, vol.VolumeID)
	if err != nil || again.Name != name {
		t.Fatalf("connect = %+v %v", again, err)
	}

	st, err := again.WriteFile(ctx, "/docs/hello.txt", strings.NewReader("hello volume"), e2b.VolumeWriteOptions{Force: true})
	if err != nil || st.Name != "hello.txt" || st.Type != "file" || st.Size != 12 {
		t.Fatalf("write = %+v %v", st, err)
	}
	if b, err := again.ReadFile(ctx, "/docs/hello.txt"); string(b) != "hello volume" || err != nil {
		t.Errorf("read = %q %v", b, err)
	}
	if _, err := again.MakeDir(ctx, "/docs/sub", e2b.VolumeWriteOptions{}); err != nil {
		t.Fatal(err)
	}
	entries, err := again.List(ctx, "/docs", 0)
	if err != nil || len(entries) != 2 {
		t.Errorf("list dir = %+v %v", entries, err)
	}
	mode := uint32(0o600)
	if st, err := again.UpdateMetadata(ctx, "/docs/hello.txt", e2b.VolumeWriteOptions{Mode: &mode}); err != nil || st.Mode&0o777 != 0o600 {
		t.Errorf("update metadata = %+v %v", st, err)
	}
	if ok, err := again.Exists(ctx, "/docs/hello.txt"); !ok || err != nil {
		t.Errorf("exists = %v %v", ok, err)
	}
	if err := again.Remove(ctx, "/docs/hello.txt"); err != nil {
		t.Fatal(err)
	}
	if ok, err := again.Exists(ctx, "/docs/hello.txt"); ok || err != nil {
		t.Errorf("exists after remove = %v %v", ok, err)
	}
	if _, err := again.ReadFile(ctx, "/nope"); !errors.As(err, new(*e2b.VolumePathNotFoundError)) {
		t.Errorf("read of a missing path: %T %v", err, err)
	}

	// Mounted in a sandbox, the content is the same.
	again.WriteFile(ctx, "/shared.txt", strings.NewReader("from the API"), e2b.VolumeWriteOptions{})
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{VolumeMounts: map[string]string{"/mnt/vol": name}})
	if b, err := sbx.Files.Read(ctx, "/mnt/vol/shared.txt", e2b.ReadOptions{}); string(b) != "from the API" || err != nil {
		t.Errorf("the mounted volume = %q %v", b, err)
	}
	if info, err := sbx.GetInfo(ctx); err != nil || len(info.VolumeMounts) != 1 || info.VolumeMounts[0].Path != "/mnt/vol" {
		t.Errorf("info's volume mounts = %+v %v", info, err)
	}
	sbx.Kill(ctx)

	if ok, err := c.DestroyVolume(ctx, vol.VolumeID); !ok || err != nil {
		t.Errorf("destroy = %v %v", ok, err)
	}
	if ok, err := c.DestroyVolume(ctx, vol.VolumeID); ok || err != nil {
		t.Errorf("destroy again = %v %v", ok, err)
	}
	if _, err := c.GetVolumeInfo(ctx, vol.VolumeID); !errors.As(err, new(*e2b.VolumeNotFoundError)) {
		t.Errorf("info of a destroyed volume: %T %v", err, err)
	}
}

// The sandbox log (E2B's CLI reads it; the JS SDK has no test of it).
func TestE2ELogs(t *testing.T) {
	t.Parallel()
	c, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	var logs []e2b.LogEntry
	eventually(t, 30*time.Second, "the sandbox has log entries", func() bool {
		var err error
		logs, err = sbx.GetLogs(ctx, e2b.LogsOptions{})
		return err == nil && len(logs) > 0
	})
	if logs[0].Message == "" || logs[0].Timestamp.IsZero() {
		t.Errorf("entry %+v", logs[0])
	}
	if one, err := sbx.GetLogs(ctx, e2b.LogsOptions{Limit: 1, Backward: true}); err != nil || len(one) != 1 {
		t.Errorf("limit 1 = %v %v", one, err)
	}
	if _, err := c.GetLogs(ctx, "nonexistingsandbox", e2b.LogsOptions{}); !errors.As(err, new(*e2b.SandboxNotFoundError)) {
		t.Errorf("logs of an unknown sandbox: %T %v", err, err)
	}
}

// template/build, runCmd, makeSymlink, tags, exists
func TestE2ETemplateBuild(t *testing.T) {
	t.Parallel()
	c := e2eClient(t)
	ctx := ctxT(t)
	if ok, err := c.TemplateExists(ctx, "base"); !ok || err != nil {
		t.Errorf("exists base = %v %v", ok, err)
	}
	if ok, err := c.TemplateExists(ctx, fmt.Sprintf("nope-%d", time.Now().UnixNano())); ok || err != nil {
		t.Errorf("exists of a random name = %v %v", ok, err)
	}
	name := fmt.Sprintf("go-sdk-%d", time.Now().UnixNano())
	dir := t.TempDir()
	os.MkdirAll(dir+"/app/sub", 0o755)
	os.WriteFile(dir+"/app/main.txt", []byte("main"), 0o644)
	os.WriteFile(dir+"/app/sub/deep.txt", []byte("deep"), 0o644)
	os.WriteFile(dir+"/cfg.txt", []byte("cfg"), 0o644)
	tpl := e2b.NewTemplate().FromTemplate("base").SetFileContext(dir).
		Copy("app", "/opt/app", e2b.CopyOptions{}).
		Copy("cfg.txt", "/opt/cfg.txt", e2b.CopyOptions{Mode: 0o600, User: "root"}).
		RunCmd("echo built > /tmp/built.txt").
		MakeSymlink("/tmp/built.txt", "/tmp/link.txt").
		SetEnvs(map[string]string{"TPL_ENV": "from the template"}).
		RunCmdAs("root", "whoami > /tmp/builder.txt")
	var logs []e2b.BuildLogEntry
	info, err := c.BuildTemplate(ctx, tpl, name+":v1", e2b.BuildOptions{OnLog: func(e e2b.BuildLogEntry) { logs = append(logs, e) }})
	if err != nil {
		t.Fatalf("build: %v (log %+v)", err, logs)
	}
	if info.TemplateID == "" || info.BuildID == "" || len(logs) == 0 {
		t.Errorf("build info %+v, %d log entries", info, len(logs))
	}
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{Template: name + ":v1"})
	res, err := sbx.Commands.Run(ctx, "cat /tmp/link.txt /tmp/builder.txt; echo $TPL_ENV", e2b.CommandOptions{})
	if err != nil || res.Stdout != "built\nroot\nfrom the template\n" {
		t.Errorf("the built sandbox: %+v %v", res, err)
	}
	res, err = sbx.Commands.Run(ctx, "cat /opt/app/main.txt /opt/app/sub/deep.txt /opt/cfg.txt; stat -c '%a %U' /opt/cfg.txt", e2b.CommandOptions{User: "root"})
	if err != nil || res.Stdout != "maindeepcfg600 root\n" {
		t.Errorf("the copied files: %+v %v", res, err)
	}
	if ok, err := c.TemplateExists(ctx, name); !ok || err != nil {
		t.Errorf("exists %s = %v %v", name, ok, err)
	}
	if tagged, err := c.AssignTemplateTags(ctx, name+":v1", "stable"); err != nil || tagged.BuildID != info.BuildID {
		t.Errorf("assign tags = %+v %v", tagged, err)
	}
	tags, err := c.GetTemplateTags(ctx, info.TemplateID)
	var names []string
	for _, tg := range tags {
		names = append(names, tg.Tag)
	}
	if err != nil || !strings.Contains(strings.Join(names, ","), "stable") {
		t.Errorf("tags = %v %v", names, err)
	}
	if err := c.RemoveTemplateTags(ctx, name, "stable"); err != nil {
		t.Errorf("remove tags: %v", err)
	}
	_, err = c.BuildTemplate(ctx, e2b.NewTemplate().FromTemplate("base").RunCmd("exit 3"), name+"-broken", e2b.BuildOptions{})
	if !errors.As(err, new(*e2b.BuildError)) {
		t.Errorf("a failing step: %T %v", err, err)
	}
}

// sandbox/create: an MCP gateway that does not start kills the sandbox
func TestE2EMCPGatewayFailureKillsTheSandbox(t *testing.T) {
	t.Parallel()
	c := e2eClient(t)
	ctx := ctxT(t)
	tag := map[string]string{"mcp": fmt.Sprint(time.Now().UnixNano())}
	_, err := c.Create(ctx, e2b.SandboxOptions{MCP: map[string]any{"nosuch": map[string]any{}}, Metadata: tag})
	var se *e2b.SandboxError
	if !errors.As(err, &se) || !strings.Contains(se.Message, "Failed to start MCP gateway") {
		t.Fatalf("err = %T %v", err, err)
	}
	if len(mustList(t, c, tag)) != 0 {
		t.Error("the sandbox outlived its failed gateway")
	}
}

func mustList(t *testing.T, c *e2b.Client, meta map[string]string) []e2b.SandboxInfo {
	t.Helper()
	all, err := c.List(e2b.ListOptions{Metadata: meta}).All(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// sandbox/lifecyclePayload: pause on timeout; the API refuses what cannot be
func TestE2ELifecycle(t *testing.T) {
	t.Parallel()
	yes := true
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{Timeout: 2 * time.Second, Lifecycle: &e2b.Lifecycle{OnTimeout: "pause", AutoResume: &yes}})
	ctx := ctxT(t)
	info, err := sbx.GetInfo(ctx)
	if err != nil || info.Lifecycle == nil || info.Lifecycle.OnTimeout != "pause" || !info.Lifecycle.AutoResume {
		t.Errorf("lifecycle in info = %+v %v", info, err)
	}
	eventually(t, 30*time.Second, "the sandbox pauses at its timeout", func() bool {
		info, err := sbx.GetInfo(ctx)
		return err == nil && info.State == e2b.StatePaused
	})
}

// sandbox/network (what needs no internet): updateNetwork reaches the sandbox's info
func TestE2EUpdateNetwork(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{Network: &e2b.NetworkOptions{DenyOut: []string{e2b.AllTraffic}}})
	ctx := ctxT(t)
	info, err := sbx.GetInfo(ctx)
	if err != nil || info.Network == nil || len(info.Network.DenyOut) != 1 {
		t.Fatalf("network at create = %+v %v", info.Network, err)
	}
	if err := sbx.UpdateNetwork(ctx, e2b.NetworkUpdate{AllowOut: []string{"10.1.2.3"}, DenyOut: []string{e2b.AllTraffic}}); err != nil {
		t.Fatal(err)
	}
	info, err = sbx.GetInfo(ctx)
	if err != nil || info.Network == nil || len(info.Network.AllowOut) != 1 || info.Network.AllowOut[0] != "10.1.2.3" {
		t.Errorf("network after update = %+v %v", info.Network, err)
	}
	if err := e2eClient(t).UpdateNetwork(ctx, "nonexistingsandbox", e2b.NetworkUpdate{}); !errors.As(err, new(*e2b.SandboxNotFoundError)) {
		t.Errorf("update of an unknown sandbox: %T %v", err, err)
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

// template/fromDockerfile
func TestE2EFromDockerfile(t *testing.T) {
	t.Parallel()
	c := e2eClient(t)
	ctx := ctxT(t)
	dir := t.TempDir()
	os.WriteFile(dir+"/data.txt", []byte("copied\n"), 0o644)
	name := fmt.Sprintf("go-sdk-df-%d", time.Now().UnixNano())
	tpl := e2b.NewTemplate().SetFileContext(dir).FromDockerfile("FROM e2bdev/base\nENV FROM_DF=yes\nRUN echo ran > /tmp/ran.txt\nCOPY data.txt /opt/data.txt\n")
	if _, err := c.BuildTemplate(ctx, tpl, name, e2b.BuildOptions{}); err != nil {
		t.Fatalf("build: %v", err)
	}
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{Template: name})
	res, err := sbx.Commands.Run(ctx, "cat /tmp/ran.txt /opt/data.txt; echo $FROM_DF; whoami; pwd", e2b.CommandOptions{})
	if err != nil || res.Stdout != "ran\ncopied\nyes\nuser\n/home/user\n" {
		t.Errorf("the sandbox of the Dockerfile: %+v %v", res, err)
	}
}
