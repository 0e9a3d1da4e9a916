package lifecycle

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
	templates "github.com/warrenhq/warren/internal/template"
)

// rtEngine builds templates by putting their image in the fake runtime.
type rtEngine struct{ rt *fake.Runtime }

func (e rtEngine) Build(ctx context.Context, r io.Reader, tag string, noCache bool, out func(string)) error {
	io.Copy(io.Discard, r)
	e.rt.Rebuild(tag)
	return nil
}

func (e rtEngine) InspectImage(ctx context.Context, ref string) (sandbox.Image, error) {
	return e.rt.InspectImage(ctx, ref)
}
func (rtEngine) ImageEnv(context.Context, string) ([]string, error) { return nil, nil }
func (rtEngine) RemoveImage(context.Context, string) error          { return nil }
func (rtEngine) RemoveLayer(context.Context, string) error          { return nil }

// twoTeams is a manager whose engine holds images of two teams: team
// ("default") and teamB, each with a snapshot; teamB also has a fork, a
// private template and its snapshot tagged by the operator under a plain
// name.
type twoTeams struct {
	*env
	snapA, snapB  sandbox.Snapshot
	tplB          templates.Resolved
	forkB         string // the fork's image
	imagesB       map[string]bool
	pythonImageID string
}

const teamB = "b"

func newTwoTeams(t testing.TB) *twoTeams {
	t.Helper()
	ctx := context.Background()
	e := &env{rt: fake.New("warren/base", "python:3.12", "busybox@sha256:"+strings.Repeat("5e", 32)), agent: fake.NewAgent(), dir: t.TempDir()}
	var reg *templates.Registry
	e.start(t, func(c *config) {
		var err error
		reg, err = templates.New(templates.Config{Store: e.store, Engine: rtEngine{e.rt}, Dir: e.dir})
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Close() })
		c.Templates = reg
	})
	tt := &twoTeams{env: e, imagesB: map[string]bool{}}
	snapshot := func(teamID, name string) sandbox.Snapshot {
		sb := e.create(t, CreateRequest{TeamID: teamID, Template: "base"})
		sn, err := e.m.Snapshot(ctx, teamID, sb.ID, name, MemoryIfPossible)
		if err != nil {
			t.Fatal(err)
		}
		return sn
	}
	tt.snapA, tt.snapB = snapshot(team, "snap-a"), snapshot(teamB, "snap-b")
	forks, err := e.m.Fork(ctx, teamB, tt.snapB.SandboxID, time.Minute, 1)
	if err != nil || forks[0].Err != nil {
		t.Fatalf("fork: %v %+v", err, forks)
	}
	tt.forkB = forks[0].Sandbox.Image
	tpl, b, err := reg.RequestBuild(ctx, teamB, templates.BuildRequest{Name: "secret-b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.StartBuild(ctx, teamB, tpl.ID, b.ID, templates.BuildSpec{FromImage: "warren/base"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if tt.tplB, err = reg.Resolve(ctx, teamB, "secret-b"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("team b's template is not built: %v", err)
		}
	}
	e.rt.Tag(tt.snapB.Image, "mirror:1")
	for _, im := range []string{tt.snapB.Image, tt.forkB, tt.tplB.Image} {
		id, ok := e.rt.ImageIDOf(im)
		if !ok {
			t.Fatalf("image %s is not on the engine", im)
		}
		tt.imagesB[id] = true
	}
	tt.pythonImageID, _ = e.rt.ImageIDOf("python:3.12")
	return tt
}

// shortPrefix returns the shortest prefix, of at least 2 hex digits, of
// the image ID id that the engine takes for that image alone.
func (tt *twoTeams) shortPrefix(t testing.TB, id string) string {
	hex := strings.TrimPrefix(id, "sha256:")
	for n := 2; n <= len(hex); n++ {
		if got, ok := tt.rt.ImageIDOf(hex[:n]); ok && got == id {
			return hex[:n]
		}
	}
	t.Fatalf("no prefix of %s names it", id)
	return ""
}

// A local image is a template only by its full reference: never by its
// ID or a prefix of one, and never an image of a snapshot, a fork or a
// template, under whatever name.
func TestLocalImageByReferenceOnly(t *testing.T) {
	tt := newTwoTeams(t)
	ctx := context.Background()
	snapID, _ := tt.rt.ImageIDOf(tt.snapB.Image)
	tplID, _ := tt.rt.ImageIDOf(tt.tplB.Image)
	for _, ref := range []string{
		tt.shortPrefix(t, snapID),
		strings.TrimPrefix(snapID, "sha256:")[:12],
		snapID,
		strings.TrimPrefix(snapID, "sha256:"),
		"sha256:" + tt.shortPrefix(t, snapID),
		tt.shortPrefix(t, tplID),
		tt.shortPrefix(t, tt.pythonImageID), // an image that may be a template, but not by ID
		tt.pythonImageID,
		tt.snapB.Image,
		"docker.io/" + tt.snapB.Image,
		tt.forkB,
		tt.tplB.Image,
		"mirror:1", // team b's snapshot under a plain name
		tt.snapB.ID, tt.snapB.Name, tt.snapB.ID + ":default",
		tt.tplB.ID, "secret-b", "secret-b:default",
		"python", // not python:3.12
	} {
		tpl, err := tt.m.resolveTemplate(ctx, team, ref)
		if err == nil {
			t.Errorf("template %q resolved to image %s", ref, tpl.image)
			continue
		}
		if k := sandbox.KindOf(err); k != sandbox.KindNotFound && k != sandbox.KindInvalid {
			t.Errorf("template %q: %v, want not found or invalid", ref, err)
		}
	}
	for ref, image := range map[string]string{
		"python:3.12":                                     "docker.io/library/python:3.12",
		"docker.io/library/python:3.12":                   "docker.io/library/python:3.12",
		"busybox@sha256:" + strings.Repeat("5e", 32):      "docker.io/library/busybox@sha256:" + strings.Repeat("5e", 32),
		"busybox:1.36@sha256:" + strings.Repeat("5e", 32): "docker.io/library/busybox@sha256:" + strings.Repeat("5e", 32),
		tt.snapA.ID: tt.snapA.Image,
		"snap-a":    tt.snapA.Image,
	} {
		tpl, err := tt.m.resolveTemplate(ctx, team, ref)
		if err != nil || tpl.image != image {
			t.Errorf("template %q = image %q, %v; want %s", ref, tpl.image, err, image)
		}
	}
	sb := tt.create(t, CreateRequest{Template: "python:3.12"})
	if c, _ := tt.container(t, sb.ContainerID); c.ImageID != tt.pythonImageID {
		t.Errorf("sandbox of python:3.12 runs image %s, want %s", c.ImageID, tt.pythonImageID)
	}
}

// FuzzResolveTemplate: whatever the ref, team "default" never resolves
// an image of team b's (its snapshot, fork or private template), by any
// name, ID or prefix.
func FuzzResolveTemplate(f *testing.F) {
	tt := newTwoTeams(f)
	snapID, _ := tt.rt.ImageIDOf(tt.snapB.Image)
	for _, s := range []string{"", "base", "python:3.12", "39", "sha256:39", "mirror:1", "snap-b", "secret-b:default",
		tt.snapB.ID, tt.snapB.Image, tt.forkB, tt.tplB.ID, tt.tplB.Image, snapID, snapID[7:], snapID[7:10], "sha256:" + snapID[7:12],
		"docker.io/" + tt.snapB.Image, "localhost/" + tt.snapB.Image, "docker.io/library/mirror:1@" + snapID, "mirror@" + snapID} {
		f.Add(s)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, ref string) {
		tpl, err := tt.m.resolveTemplate(ctx, team, ref)
		if err != nil {
			return
		}
		id, _ := tt.rt.ImageIDOf(tpl.image)
		if tt.imagesB[id] || tpl.id == tt.snapB.ID || tpl.id == tt.tplB.ID {
			t.Fatalf("team %s resolved %q to team b's %+v (image ID %s)", team, ref, tpl, id)
		}
	})
}
