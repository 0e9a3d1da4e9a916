//go:build e2e

// End to end: template builds.

package e2b_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/sdk/go/e2b"
)

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
	os.MkdirAll(dir+"/linked/real", 0o755)
	os.WriteFile(dir+"/linked/real/r.txt", []byte("resolved"), 0o644)
	os.Symlink("real", dir+"/linked/via")
	tpl := e2b.NewTemplate().FromTemplate("base").SetFileContext(dir).
		Copy("app", "/opt/app", e2b.CopyOptions{}).
		Copy("cfg.txt", "/opt/cfg.txt", e2b.CopyOptions{Mode: 0o600, User: "root"}).
		Copy("linked", "/opt/linked", e2b.CopyOptions{ResolveSymlinks: true, ForceUpload: true}).
		RunCmd("echo built > /tmp/built.txt").
		MakeSymlink("/tmp/built.txt", "/tmp/link.txt").
		MakeDirWith(e2b.StepOptions{Mode: 0o750, User: "root"}, "/opt/made").
		RunCmd("touch /tmp/gone.txt").
		RemoveWith(e2b.StepOptions{Force: true}, "/tmp/gone.txt", "/tmp/never-there.txt").
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
	res, err = sbx.Commands.Run(ctx, "cat /opt/linked/via/r.txt; test -L /opt/linked/via || echo ' not a link'; stat -c '%a %U' /opt/made; test -e /tmp/gone.txt || echo removed", e2b.CommandOptions{User: "root"})
	if err != nil || res.Stdout != "resolved not a link\n750 root\nremoved\n" {
		t.Errorf("the resolved link, the made directory, the removed file: %+v %v", res, err)
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
