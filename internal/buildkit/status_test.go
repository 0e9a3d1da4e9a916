package buildkit

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/buildkit/client"
)

const dockerfile = `FROM warren/base
USER root
RUN ["/bin/sh","-c","id -u user || useradd user"]
WORKDIR /home/user
LABEL dev.warren.rebuild=x
ENV A="b" \
  C="d"
COPY --chown=user ctx/1 /opt/app
RUN ["/bin/sh","-c","exit 3"]
USER root
`

func TestInstructions(t *testing.T) {
	got := instructions(dockerfile)
	if len(got) != 9 {
		t.Fatalf("%d instructions, want 9: %q", len(got), got)
	}
	if got[5].keyword != "ENV" || got[5].text != `ENV A="b"   C="d"` {
		t.Errorf("continued ENV = %+v", got[5])
	}
	if diff := cmp.Diff([]string{"warren/base"}, bases(got)); diff != "" {
		t.Errorf("bases (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"warren/template/abc:b1"}, bases(instructions("FROM docker.io/warren/template/abc:b1\n"))); diff != "" {
		t.Errorf("bases of a template (-want +got):\n%s", diff)
	}
}

// BuildKit's vertexes become the classic builder's lines, numbered as the
// classic builder numbers instructions (ENV, USER and LABEL have no
// vertex), with the cache said and each command's output line by line.
func TestTranslator(t *testing.T) {
	var lines []string
	tr := newTranslator(instructions(dockerfile), func(l string) { lines = append(lines, l) })
	now := time.Now()
	tr.status(&client.SolveStatus{Vertexes: []*client.Vertex{
		{Digest: "sha256:0", Name: "[internal] load build definition from Dockerfile", Started: &now},
		{Digest: "sha256:3", Name: "[3/6] WORKDIR /home/user", Cached: true},
		{Digest: "sha256:1", Name: "[1/6] FROM 10.0.0.1:5000/warren/base@sha256:ab", Cached: true},
		{Digest: "sha256:2", Name: `[2/6] RUN ["/bin/sh","-c","id -u user || useradd user"]`, Cached: true},
	}})
	tr.status(&client.SolveStatus{Vertexes: []*client.Vertex{
		{Digest: "sha256:4", Name: "[4/6] COPY --chown=user ctx/1 /opt/app", Started: &now},
		{Digest: "sha256:5", Name: `[ 5/6] RUN ["/bin/sh","-c","exit 3"]`, Started: &now},
	}})
	tr.status(&client.SolveStatus{Logs: []*client.VertexLog{{Vertex: "sha256:5", Data: []byte("one\ntw")}, {Vertex: "sha256:5", Data: []byte("o\nthree")}}})
	tr.status(&client.SolveStatus{Vertexes: []*client.Vertex{
		{Digest: "sha256:5", Name: `[ 5/6] RUN ["/bin/sh","-c","exit 3"]`, Started: &now, Completed: &now,
			Error: `process "/bin/sh -c exit 3" did not complete successfully: exit code: 3`},
	}})
	tr.flush()
	want := []string{
		"Step 4/9 : WORKDIR /home/user", " ---> Using cache",
		"Step 1/9 : FROM warren/base", " ---> Using cache",
		`Step 3/9 : RUN ["/bin/sh","-c","id -u user || useradd user"]`, " ---> Using cache",
		"Step 7/9 : COPY --chown=user ctx/1 /opt/app",
		`Step 8/9 : RUN ["/bin/sh","-c","exit 3"]`,
		"one", "two", "three",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if got, want := tr.failure(), `process "/bin/sh -c exit 3" did not complete successfully: exit code: 3 (returned a non-zero code: 3)`; got != want {
		t.Errorf("failure = %q, want %q", got, want)
	}
}

// A failed build's status can end before its failing RUN said it
// started: the RUN that BuildKit's error names is said last.
func TestTranslatorStoppedAtTheFailedRun(t *testing.T) {
	var lines []string
	tr := newTranslator(instructions(dockerfile), func(l string) { lines = append(lines, l) })
	tr.status(&client.SolveStatus{Vertexes: []*client.Vertex{
		{Digest: "sha256:1", Name: "[1/6] FROM 10.0.0.1:5000/warren/base@sha256:ab", Cached: true},
		{Digest: "sha256:5", Name: `[5/6] RUN ["/bin/sh","-c","exit 3"]`},
	}})
	tr.status(&client.SolveStatus{Logs: []*client.VertexLog{{Vertex: "sha256:5", Data: []byte("out\n")}}})
	tr.stopped(errors.New(`process "/bin/sh -c exit 3" did not complete successfully: exit code: 3`))
	want := []string{"Step 1/9 : FROM warren/base", " ---> Using cache", `Step 8/9 : RUN ["/bin/sh","-c","exit 3"]`, "out"}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if got := commandLine("RUN echo a"); got != "/bin/sh -c echo a" {
		t.Errorf("shell form: %q", got)
	}
}
