package e2b_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/sdk/go/e2b"
)

func TestBuildTemplateSendsStepsAndFollowsTheLog(t *testing.T) {
	f := newFake(t)
	f.handleJSON("POST /v3/templates", 202, map[string]any{"templateID": "tpl1", "buildID": "b1", "names": []string{"mine:v1"}})
	f.mux.HandleFunc("POST /v2/templates/tpl1/builds/b1", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(202) })
	var polls atomic.Int32
	f.mux.HandleFunc("GET /templates/tpl1/builds/b1/status", func(w http.ResponseWriter, r *http.Request) {
		// building with one entry, then error with one more, then the drained log.
		switch polls.Add(1) {
		case 1:
			writeJSON(w, 200, map[string]any{"status": "building", "logEntries": []map[string]any{{"message": "step 1", "level": "info"}}})
		case 2:
			writeJSON(w, 200, map[string]any{"status": "error", "logEntries": []map[string]any{{"message": "step 2", "level": "error"}}, "reason": map[string]any{"message": "exit 3", "step": "2"}})
		default:
			writeJSON(w, 200, map[string]any{"status": "error", "logEntries": []any{}})
		}
	})
	tpl := e2b.NewTemplate().FromTemplate("base").AptInstall("jq", "curl").SkipCache().RunCmd("a", "b").SetEnvs(map[string]string{"B": "2", "A": "1"})
	var logs []string
	_, err := f.client().BuildTemplate(context.Background(), tpl, "mine:v1", e2b.BuildOptions{PollInterval: 1, OnLog: func(e e2b.BuildLogEntry) { logs = append(logs, e.Message) }})
	var be *e2b.BuildError
	if !errors.As(err, &be) || be.Message != "exit 3" || be.Step != "2" {
		t.Errorf("err = %T %v", err, err)
	}
	if d := cmp.Diff([]string{"step 1", "step 2"}, logs); d != "" || polls.Load() != 3 {
		t.Errorf("logs (-want +got) %s, %d polls", d, polls.Load())
	}
	_, body := f.last(t, "/v2/templates/tpl1/builds/b1")
	var got map[string]any
	json.Unmarshal([]byte(body), &got)
	want := map[string]any{
		"fromTemplate": "base",
		"force":        false,
		"steps": []any{
			map[string]any{"type": "RUN", "args": []any{"apt-get update && DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y jq curl", "root"}, "force": false},
			map[string]any{"type": "RUN", "args": []any{"a && b"}, "force": true},
			map[string]any{"type": "ENV", "args": []any{"A", "1", "B", "2"}, "force": true},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("build body (-want +got):\n%s", d)
	}
	if _, req := f.last(t, "/v3/templates"); req != `{"cpuCount":2,"memoryMB":1024,"name":"mine:v1"}` {
		t.Errorf("request body %s", req)
	}
}

func TestTemplateSteps(t *testing.T) {
	f := newFake(t)
	f.handleJSON("POST /v3/templates", 202, map[string]any{"templateID": "tpl1", "buildID": "b1"})
	f.mux.HandleFunc("POST /v2/templates/tpl1/builds/b1", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(202) })
	c := f.client()
	for _, tc := range []struct {
		name string
		tpl  *e2b.Template
		want string
	}{
		{"git clone", e2b.NewTemplate().GitClone("https://example.test/r.git", "/src", e2b.TemplateGitOptions{Branch: "main", Depth: 1}).
			GitClone("https://example.test/s.git", "", e2b.TemplateGitOptions{User: "root"}),
			`{"force":false,"fromImage":"e2bdev/base","steps":[{"type":"RUN","args":["git clone 'https://example.test/r.git' --branch 'main' --single-branch --depth 1 '/src'"],"force":false},{"type":"RUN","args":["git clone 'https://example.test/s.git'","root"],"force":false}]}`},
		{"files", e2b.NewTemplate().FromUbuntuImage("").MakeDir("/a b").Rename("/x", "/y").Remove("/z").SetWorkdir("/w").SetUser("u"),
			`{"force":false,"fromImage":"ubuntu:latest","steps":[{"type":"RUN","args":["mkdir -p '/a b'"],"force":false},{"type":"RUN","args":["mv '/x' '/y'"],"force":false},{"type":"RUN","args":["rm '/z'"],"force":false},{"type":"WORKDIR","args":["/w"],"force":false},{"type":"USER","args":["u"],"force":false}]}`},
		{"file step options", e2b.NewTemplate().MakeDirWith(e2b.StepOptions{Mode: 0o755, User: "root"}, "/a", "/b").
			RemoveWith(e2b.StepOptions{Recursive: true, Force: true}, "/z").RenameWith("/x", "/y", e2b.StepOptions{Force: true}).
			MakeSymlinkWith("/t", "/l", e2b.StepOptions{Force: true, User: "u"}),
			`{"force":false,"fromImage":"e2bdev/base","steps":[{"type":"RUN","args":["mkdir -p -m 0755 '/a' '/b'","root"],"force":false},{"type":"RUN","args":["rm -r -f '/z'"],"force":false},{"type":"RUN","args":["mv '/x' '/y' -f"],"force":false},{"type":"RUN","args":["ln -s -f '/t' '/l'","u"],"force":false}]}`},
		{"package installs", e2b.NewTemplate().AptInstallWith(e2b.AptOptions{NoInstallRecommends: true, FixMissing: true}, "vim").
			PipInstallWith(e2b.PipOptions{User: true}, "numpy").PipInstall().NpmInstall("express").NpmInstallWith(e2b.InstallOptions{Global: true}, "tsx").
			BunInstallWith(e2b.InstallOptions{Dev: true}, "typescript").NpmInstall(),
			`{"force":false,"fromImage":"e2bdev/base","steps":[{"type":"RUN","args":["apt-get update \u0026\u0026 DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y --no-install-recommends --fix-missing vim","root"],"force":false},{"type":"RUN","args":["pip install --user numpy"],"force":false},{"type":"RUN","args":["pip install .","root"],"force":false},{"type":"RUN","args":["npm install express"],"force":false},{"type":"RUN","args":["npm install -g tsx","root"],"force":false},{"type":"RUN","args":["bun install --dev typescript"],"force":false},{"type":"RUN","args":["npm install"],"force":false}]}`},
		{"dev container", e2b.NewTemplate().FromTemplate(e2b.DevContainerTemplate).BetaDevContainerPrebuild("/dc").BetaSetDevContainerStart("/dc"),
			`{"force":false,"fromTemplate":"devcontainer","readyCmd":"[ -f '/devcontainer.up' ]","startCmd":"sudo devcontainer up --workspace-folder '/dc' \u0026\u0026 sudo /prepare-exec.sh '/dc' | sudo tee /devcontainer.sh \u003e /dev/null \u0026\u0026 sudo chmod +x /devcontainer.sh \u0026\u0026 sudo touch /devcontainer.up","steps":[{"type":"RUN","args":["devcontainer build --workspace-folder '/dc'","root"],"force":false}]}`},
		{"registry and start", e2b.NewTemplate().FromAWSRegistry("r/i", "k", "s", "eu").SetStartCmd("serve", e2b.WaitForPort(8080)),
			`{"force":false,"fromImage":"r/i","fromImageRegistry":{"awsAccessKeyId":"k","awsRegion":"eu","awsSecretAccessKey":"s","type":"aws"},"readyCmd":"ss -tuln | grep -q ':8080 '","startCmd":"serve","steps":[]}`},
		{"skip cache before the base", e2b.NewTemplate().SkipCache().FromTemplate("base"),
			`{"force":true,"fromTemplate":"base","steps":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.BuildTemplateInBackground(context.Background(), tc.tpl, "n", e2b.BuildOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, body := f.last(t, "/v2/templates/tpl1/builds/b1"); body != tc.want {
				t.Errorf("body\n got %s\nwant %s", body, tc.want)
			}
		})
	}
	_, err := c.BuildTemplateInBackground(context.Background(), e2b.NewTemplate().FromTemplate("base").AddMCPServer("x"), "n", e2b.BuildOptions{})
	if !errors.As(err, new(*e2b.BuildError)) {
		t.Errorf("MCP servers on another base: %v", err)
	}
	_, err = c.BuildTemplateInBackground(context.Background(), e2b.NewTemplate().FromTemplate("base").BetaDevContainerPrebuild("/dc"), "n", e2b.BuildOptions{})
	if !errors.As(err, new(*e2b.BuildError)) {
		t.Errorf("a dev container on another base: %v", err)
	}
}

func TestFromDockerfile(t *testing.T) {
	df := `# a comment
FROM python:3.12
ARG VERSION=1.0 OTHER
ENV APP_HOME="/srv/app" DEBUG=1
ENV GREETING hello world
RUN apt-get update && \
    apt-get install -y curl
COPY --chown=app:app requirements.txt src/ /srv/app/
WORKDIR /srv/app
EXPOSE 8080
CMD ["python", "-m", "http.server"]
`
	tpl := e2b.NewTemplate().FromDockerfile(df)
	got, err := tpl.ToJSON()
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	json.Unmarshal([]byte(got), &body)
	var steps []string
	for _, s := range body["steps"].([]any) {
		m := s.(map[string]any)
		steps = append(steps, fmt.Sprintf("%v %v", m["type"], m["args"]))
	}
	want := []string{
		"USER [root]", "WORKDIR [/]",
		"ENV [OTHER  VERSION 1.0]",
		"ENV [APP_HOME /srv/app DEBUG 1]",
		"ENV [GREETING hello world]",
		"RUN [apt-get update && apt-get install -y curl]",
		"COPY [requirements.txt /srv/app/ app ]",
		"COPY [src/ /srv/app/ app ]",
		"WORKDIR [/srv/app]",
		"USER [user]",
	}
	if d := cmp.Diff(want, steps); d != "" || body["fromImage"] != "python:3.12" || body["startCmd"] != "python -m http.server" || body["readyCmd"] != "sleep 20" {
		t.Errorf("steps (-want +got):\n%s\nbody %v", d, body)
	}
	dockerfile, err := tpl.ToDockerfile()
	if err != nil || !strings.HasPrefix(dockerfile, "FROM python:3.12\nUSER root\nWORKDIR /\n") || !strings.Contains(dockerfile, "ENV APP_HOME=/srv/app DEBUG=1\n") || !strings.HasSuffix(dockerfile, "ENTRYPOINT python -m http.server\n") {
		t.Errorf("dockerfile:\n%s %v", dockerfile, err)
	}
	if _, err := e2b.NewTemplate().FromTemplate("base").ToDockerfile(); err == nil {
		t.Error("a template on a template rendered as a Dockerfile")
	}
	f := newFake(t)
	for _, bad := range []string{"RUN true", "FROM a AS b\nFROM b\n"} {
		if _, err := f.client().BuildTemplateInBackground(context.Background(), e2b.NewTemplate().FromDockerfile(bad), "n", e2b.BuildOptions{}); !errors.As(err, new(*e2b.BuildError)) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestDefaultBuildLogger(t *testing.T) {
	var out strings.Builder
	log := e2b.DefaultBuildLogger(&out, "warn")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	for _, e := range []e2b.BuildLogEntry{{Timestamp: at, Level: "info", Message: "hidden"}, {Timestamp: at, Level: "warn", Message: "careful"}, {Timestamp: at, Level: "error", Message: "broke"}} {
		log(e)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "| 03:04:05 WARN  careful") || !strings.HasSuffix(lines[1], "| 03:04:05 ERROR broke") {
		t.Errorf("log:\n%s", out.String())
	}
}
