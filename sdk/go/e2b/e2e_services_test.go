//go:build e2e

// End to end: the code interpreter, secrets and volumes.

package e2b_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/sdk/go/e2b"
)

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
