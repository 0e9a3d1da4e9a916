package template_test

import (
	"archive/tar"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/template"
)

// dockerEngine returns the Docker engine with warren/base present, or
// skips: these tests need both (CI has them).
func dockerEngine(t *testing.T) *docker.Builder {
	t.Helper()
	if err := exec.Command("docker", "image", "inspect", "warren/base").Run(); err != nil {
		t.Skip("skipping: needs a Docker engine with the warren/base image (bin/warren image build)")
	}
	cli, err := docker.Connect()
	if err != nil {
		t.Skipf("skipping: no Docker engine: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return docker.NewBuilder(cli, "")
}

// waitBuild polls until the build is done and returns it with its log.
func waitBuild(t *testing.T, reg *template.Registry, team, tplID, buildID string) (template.Build, []template.LogEntry) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		b, logs, err := reg.Status(context.Background(), team, tplID, buildID, 0, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		if b.Status.Done() {
			return b, logs
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("build did not finish in time")
	return template.Build{}, nil
}

// dockerRun runs a shell command in image as root and returns its output.
func dockerRun(t *testing.T, image, script string) string {
	t.Helper()
	out, err := exec.Command("docker", "run", "--rm", "--user", "0", "--entrypoint", "/bin/sh", image, "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("docker run %s: %v\n%s", script, err, out)
	}
	return strings.TrimSpace(string(out))
}

func build(t *testing.T, reg *template.Registry, name string, spec template.BuildSpec, upl ...[]byte) (template.Template, template.Build, []template.LogEntry) {
	t.Helper()
	ctx := context.Background()
	tpl, b, err := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: name, CPUCount: 1, MemoryMB: 256})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range upl {
		upload(t, reg, "team1", tpl.ID, u)
	}
	if err := reg.StartBuild(ctx, "team1", tpl.ID, b.ID, spec); err != nil {
		t.Fatal(err)
	}
	b, logs := waitBuild(t, reg, "team1", tpl.ID, b.ID)
	return tpl, b, logs
}

func TestDockerBuildEveryStep(t *testing.T) {
	engine := dockerEngine(t)
	reg, _, _ := newRegistry(t, engine, 2)
	files := archive(t,
		entry{name: "app", typ: '5', mode: 0o755},
		entry{name: "app/run.sh", body: "#!/bin/sh\necho hi\n", mode: 0o644},
		entry{name: "app/data.txt", body: "data"},
	)
	single := archive(t, entry{name: "hello.txt", body: "hello"})
	spec := template.BuildSpec{
		FromImage: "warren/base",
		StartCmd:  "sleep 1000",
		ReadyCmd:  "true",
		Steps: []template.Step{
			{Type: "RUN", Args: []string{"whoami > /tmp/who-default && pwd > /tmp/pwd-default"}},
			{Type: "RUN", Args: []string{"mkdir -p /opt/x && whoami > /opt/x/who", "root"}},
			{Type: "COPY", Args: []string{"app", "/opt/app", "user", "0755"}, FilesHash: hashOf(files)},
			{Type: "COPY", Args: []string{"hello.txt", "/opt/hello.txt", "", ""}, FilesHash: hashOf(single)},
			{Type: "ENV", Args: []string{"GREETING", "hello world", "PATH", "/opt/app:$PATH"}},
			{Type: "WORKDIR", Args: []string{"/opt/app"}},
			{Type: "USER", Args: []string{"root"}},
			{Type: "RUN", Args: []string{"whoami > /tmp/who-last && pwd > /tmp/pwd-last"}},
		},
	}
	tpl, b, logs := build(t, reg, "every-step", spec, files, single)
	if b.Status != template.StatusReady {
		t.Fatalf("status %s, reason %+v, logs %+v", b.Status, b.Reason, logs)
	}
	if b.User != "root" || b.Workdir != "/opt/app" || b.Env["GREETING"] != "hello world" || !strings.HasPrefix(b.Env["PATH"], "/opt/app:/") {
		t.Errorf("build metadata: user %q workdir %q env %v", b.User, b.Workdir, b.Env)
	}
	got := dockerRun(t, b.Image, `cat /tmp/who-default /tmp/pwd-default /opt/x/who /tmp/who-last /tmp/pwd-last;
		stat -c '%U %a' /opt/app/run.sh /opt/app/data.txt /opt/hello.txt; id -u; echo "$GREETING"`)
	want := "user\n/home/user\nroot\nroot\n/opt/app\nuser 755\nuser 755\nuser 644\n0\nhello world"
	if got != want {
		t.Errorf("image contents:\n%s\nwant:\n%s", got, want)
	}
	out, _ := exec.Command("docker", "image", "inspect", "-f", "{{.Config.User}}", b.Image).Output()
	if u := strings.TrimSpace(string(out)); u != "root" && u != "" {
		t.Errorf("image USER = %q, want root or none", u)
	}
	res, err := reg.Resolve(context.Background(), "team1", "every-step")
	if err != nil || res.Image != b.Image || res.StartCmd != "sleep 1000" || res.CPUCount != 1 || res.MemoryMB != 256 {
		t.Errorf("Resolve = %+v, %v", res, err)
	}

	// A rebuild with no change takes every layer from the cache.
	start := time.Now()
	_, b2, logs2 := build(t, reg, "every-step", spec)
	took := time.Since(start)
	t.Logf("no-change rebuild took %s", took)
	if b2.Status != template.StatusReady {
		t.Fatalf("rebuild status %s, reason %+v", b2.Status, b2.Reason)
	}
	for _, e := range logs2 {
		if strings.HasPrefix(e.Message, "hi") || strings.Contains(e.Message, "Running in") {
			t.Errorf("rebuild ran a step: %q", e.Message)
		}
	}
	if took > 20*time.Second {
		t.Errorf("no-change rebuild took %s", took)
	}
	t.Cleanup(func() { reg.Delete(context.Background(), "team1", tpl.ID) })
}

func TestDockerBuildFailureNamesStep(t *testing.T) {
	engine := dockerEngine(t)
	reg, _, _ := newRegistry(t, engine, 2)
	spec := template.BuildSpec{FromImage: "warren/base", Steps: []template.Step{
		{Type: "RUN", Args: []string{"echo first"}},
		{Type: "RUN", Args: []string{"echo about to fail; exit 3"}},
		{Type: "RUN", Args: []string{"echo never"}},
	}}
	tpl, b, logs := build(t, reg, "fails", spec)
	t.Cleanup(func() { reg.Delete(context.Background(), "team1", tpl.ID) })
	if b.Status != template.StatusError || b.Reason == nil || b.Reason.Step != "2" {
		t.Fatalf("status %s reason %+v", b.Status, b.Reason)
	}
	if want := "failed to run command 'echo about to fail; exit 3': exit status 3"; b.Reason.Message != want {
		t.Errorf("reason %q, want %q", b.Reason.Message, want)
	}
	var sawOutput bool
	for _, e := range logs {
		if e.Message == "about to fail" && e.Step == "2" {
			sawOutput = true
		}
		if e.Message == "never" {
			t.Errorf("step 3 ran")
		}
	}
	if !sawOutput {
		t.Errorf("the failing step's output is not in the log: %+v", logs)
	}
	if _, err := reg.Resolve(context.Background(), "team1", "fails"); err == nil {
		t.Errorf("a failed template resolves")
	}
	// The passed step's layer stays as the next build's cache, and goes
	// with the template.
	if b.CacheLayer == "" {
		t.Fatal("the failed build recorded no cache layer")
	}
	out, err := exec.Command("docker", "image", "inspect", "--format", "{{json .ContainerConfig.Cmd}}", b.CacheLayer).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "echo first") {
		t.Fatalf("cache layer %s: %v %s; want the layer of step 1", b.CacheLayer, err, out)
	}
	if err := reg.Delete(context.Background(), "team1", tpl.ID); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("docker", "image", "inspect", b.CacheLayer).Run(); err == nil {
		t.Errorf("cache layer %s left after the template was deleted", b.CacheLayer)
	}
	if err := exec.Command("docker", "image", "inspect", "warren/base").Run(); err != nil {
		t.Errorf("warren/base went with the template: %v", err)
	}
}

// TestDockerCopyAsE2B builds E2B's copy cases and checks the image: what
// each file is, its owner, mode and link target.
func TestDockerCopyAsE2B(t *testing.T) {
	engine := dockerEngine(t)
	reg, _, _ := newRegistry(t, engine, 2)
	folder := folderUpload(t)
	hello := archive(t, entry{name: "hello.txt", body: "hello"})
	tree := archive(t,
		entry{name: "src", typ: tar.TypeDir, mode: 0o755},
		entry{name: "src/a.ts", body: "a"},
		entry{name: "src/lib", typ: tar.TypeDir, mode: 0o755},
		entry{name: "src/lib/b.ts", body: "b"},
		entry{name: "src/lib/ln", typ: tar.TypeSymlink, link: "b.ts"},
	)
	txts := archive(t, entry{name: "a.txt", body: "a"}, entry{name: "b.txt", body: "b"})
	step := func(src, dest, user, mode string, files []byte) template.Step {
		return template.Step{Type: "COPY", Args: []string{src, dest, user, mode}, FilesHash: hashOf(files)}
	}
	spec := template.BuildSpec{FromImage: "warren/base", Steps: []template.Step{
		step("folder/*", "folder", "", "", folder),
		{Type: "RUN", Args: []string{"cat folder/test.txt folder/symlink.txt"}},
		step("hello.txt", "/opt/greeting.txt", "", "", hello),
		step("hello.txt", "/opt/in/", "root", "0600", hello),
		step("src", "/opt/tree", "root", "0750", tree),
		step("*.txt", "/opt/txt", "", "", txts),
		step("src/**/*.ts", "/opt/ts/", "", "", tree),
		step("folder/symlink2.txt", "/opt/links/abs.txt", "", "", folder),
		step("folder/symlink3.txt", "/opt/links/", "", "", folder),
		step("folder/symlink.txt", "/opt/links/rel.txt", "", "", folder),
	}}
	tpl, b, logs := build(t, reg, "copy-as-e2b", spec, folder, hello, tree, txts)
	t.Cleanup(func() { reg.Delete(context.Background(), "team1", tpl.ID) })
	if b.Status != template.StatusReady {
		t.Fatalf("status %s, reason %+v, logs %+v", b.Status, b.Reason, logs)
	}
	got := dockerRun(t, b.Image, `cd /home/user && for f in folder folder/test.txt folder/symlink.txt folder/symlink2.txt folder/symlink3.txt \
		/opt/greeting.txt /opt/in/hello.txt /opt/tree/a.ts /opt/tree/lib /opt/tree/lib/b.ts /opt/tree/lib/ln /opt/txt/a.txt /opt/txt/b.txt \
		/opt/ts/a.ts /opt/ts/lib/b.ts /opt/links/abs.txt /opt/links/symlink3.txt /opt/links/rel.txt; do
		if [ -L "$f" ]; then echo "$f -> $(readlink "$f") $(stat -c '%U' "$f")"; else stat -c '%n %F %U:%G %a' "$f"; fi; done`)
	want := strings.Join([]string{
		"folder directory user:user 755",
		"folder/test.txt regular file user:user 644",
		"folder/symlink.txt -> test.txt user",
		"folder/symlink2.txt -> /tmp/python_sync_test_x/folder/test.txt user",
		"folder/symlink3.txt -> 12345test.txt user",
		"/opt/greeting.txt regular file user:user 644",
		"/opt/in/hello.txt regular file root:root 600",
		"/opt/tree/a.ts regular file root:root 750",
		"/opt/tree/lib directory root:root 750",
		"/opt/tree/lib/b.ts regular file root:root 750",
		"/opt/tree/lib/ln -> b.ts root",
		"/opt/txt/a.txt regular file user:user 644",
		"/opt/txt/b.txt regular file user:user 644",
		"/opt/ts/a.ts regular file user:user 644",
		"/opt/ts/lib/b.ts regular file user:user 644",
		"/opt/links/abs.txt -> /tmp/python_sync_test_x/folder/test.txt user",
		"/opt/links/symlink3.txt -> 12345test.txt user",
		"/opt/links/rel.txt -> test.txt user",
	}, "\n")
	if got != want {
		t.Errorf("image:\n%s\nwant:\n%s", got, want)
	}
}

// TestDockerFailureTexts checks the reasons of steps the engine fails, in
// E2B's words.
func TestDockerFailureTexts(t *testing.T) {
	engine := dockerEngine(t)
	reg, _, _ := newRegistry(t, engine, 2)
	hello := archive(t, entry{name: "hello.txt", body: "hello"})
	for _, tc := range []struct {
		name  string
		steps []template.Step
		want  string
	}{
		{"run as nobody", []template.Step{{Type: "RUN", Args: []string{"true"}}, {Type: "RUN", Args: []string{"whoami", "root123"}}},
			"failed to run command 'whoami': command failed: unauthenticated: invalid username: 'root123'"},
		{"copy to nobody", []template.Step{{Type: "RUN", Args: []string{"true"}}, {Type: "COPY", Args: []string{"hello.txt", "/tmp/", "root123", ""}, FilesHash: hashOf(hello)}},
			"failed to move files in sandbox: chown: invalid user: 'root123:root123'"},
	} {
		tpl, b, _ := build(t, reg, "fails-"+strings.ReplaceAll(tc.name, " ", "-"), template.BuildSpec{FromImage: "warren/base", Steps: tc.steps}, hello)
		reg.Delete(context.Background(), "team1", tpl.ID)
		if b.Status != template.StatusError || b.Reason == nil || b.Reason.Message != tc.want || b.Reason.Step != "2" {
			t.Errorf("%s: %s %+v, want step 2 failing with %q", tc.name, b.Status, b.Reason, tc.want)
		}
	}
}

// A USER step makes the user when the image lacks it, as E2B's builder
// does; later steps run as it.
func TestDockerUserStepMakesTheUser(t *testing.T) {
	engine := dockerEngine(t)
	reg, _, _ := newRegistry(t, engine, 2)
	tpl, b, logs := build(t, reg, "makes-user", template.BuildSpec{FromImage: "warren/base", Steps: []template.Step{
		{Type: "USER", Args: []string{"maker"}},
		{Type: "RUN", Args: []string{"whoami > /tmp/who && echo $HOME >> /tmp/who"}},
		{Type: "USER", Args: []string{"root"}},
	}})
	t.Cleanup(func() { reg.Delete(context.Background(), "team1", tpl.ID) })
	if b.Status != template.StatusReady {
		t.Fatalf("status %s, reason %+v, logs %+v", b.Status, b.Reason, logs)
	}
	if got := dockerRun(t, b.Image, "cat /tmp/who; stat -c %U /home/maker"); got != "maker\n/home/maker\nmaker" {
		t.Errorf("image: %q", got)
	}
}
