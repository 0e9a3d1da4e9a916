package template_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
	"github.com/warrenhq/warren/internal/template"
)

func wantKind(t *testing.T, what string, err error, kind sandbox.Kind, msg string) {
	t.Helper()
	if err == nil || sandbox.KindOf(err) != kind || !strings.Contains(sandbox.Message(err), msg) {
		t.Errorf("%s: got %v (kind %d), want kind %d with %q", what, err, sandbox.KindOf(err), kind, msg)
	}
}

func TestUploadSizeAndReuse(t *testing.T) {
	reg, _, _ := newRegistry(t, &fakeEngine{}, 2)
	ctx := context.Background()
	tpl, _, err := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: "up"})
	if err != nil {
		t.Fatal(err)
	}
	body := archive(t, entry{name: "a.txt", body: "a"})
	h := hashOf(body)

	_, tok, err := reg.FileUpload(ctx, "team1", tpl.ID, h)
	if err != nil || tok == "" {
		t.Fatalf("FileUpload = %q, %v", tok, err)
	}
	wantKind(t, "unknown length", reg.Upload(tok, -1, bytes.NewReader(body)), sandbox.KindInvalid, "Content-Length is required")
	wantKind(t, "short body", reg.Upload(tok, int64(len(body)+10), bytes.NewReader(body)), sandbox.KindInvalid, "Content-Length")
	wantKind(t, "cut off", reg.Upload(tok, int64(len(body)), iotest.ErrReader(iotestErr)), sandbox.KindInvalid, "upload failed")
	wantKind(t, "not an archive", reg.Upload(tok, 5, strings.NewReader("hello")), sandbox.KindInvalid, "invalid build context archive")
	if err := reg.Upload(tok, int64(len(body)), bytes.NewReader(body)); err != nil {
		t.Fatalf("upload: %v", err)
	}
	wantKind(t, "ticket reused", reg.Upload(tok, int64(len(body)), bytes.NewReader(body)), sandbox.KindNotFound, "unknown or expired")

	// The same files are present for every later build of the team, not
	// for another team.
	tpl2, _, _ := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: "up2"})
	if present, _, err := reg.FileUpload(ctx, "team1", tpl2.ID, h); !present || err != nil {
		t.Errorf("second FileUpload: present %v, %v", present, err)
	}
	other, _, _ := reg.RequestBuild(ctx, "team2", template.BuildRequest{Name: "up3"})
	if present, _, _ := reg.FileUpload(ctx, "team2", other.ID, h); present {
		t.Errorf("another team sees team1's files")
	}
	_, _, err = reg.FileUpload(ctx, "team1", tpl.ID, "not-a-hash")
	wantKind(t, "bad hash", err, sandbox.KindInvalid, "invalid files hash")
	_, _, err = reg.FileUpload(ctx, "team2", tpl.ID, h)
	wantKind(t, "other team's template", err, sandbox.KindNotFound, "not found")
}

var iotestErr = errorString("connection reset")

type errorString string

func (e errorString) Error() string { return string(e) }

func TestBadRequests(t *testing.T) {
	reg, _, _ := newRegistry(t, &fakeEngine{}, 2)
	ctx := context.Background()
	for _, tc := range []struct{ name, want string }{
		{"Upper", "invalid template name"},
		{"-dash", "invalid template name"},
		{"ok:Bad Tag", "invalid tag"},
		{"base", "reserved"},
		{"code-interpreter-v1:v2", "reserved"},
		{"", "name is required"},
	} {
		_, _, err := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: tc.name})
		wantKind(t, "name "+tc.name, err, sandbox.KindInvalid, tc.want)
	}
	if _, _, err := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: "mine"}); err != nil {
		t.Fatal(err)
	}
	_, _, err := reg.RequestBuild(ctx, "team2", template.BuildRequest{Name: "mine"})
	wantKind(t, "another team's name", err, sandbox.KindConflict, "taken")

	tpl, b, _ := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: "steps"})
	for _, tc := range []struct {
		what string
		spec template.BuildSpec
		want string
	}{
		{"unknown type", template.BuildSpec{Steps: []template.Step{{Type: "FROB"}}}, "unknown step type 'FROB'"},
		{"no files hash", template.BuildSpec{Steps: []template.Step{{Type: "COPY", Args: []string{"a", "/a"}}}}, "filesHash is missing"},
		{"not uploaded", template.BuildSpec{Steps: []template.Step{{Type: "COPY", Args: []string{"a", "/a"}, FilesHash: strings.Repeat("ab", 32)}}}, "were not uploaded"},
		{"escaping source", template.BuildSpec{Steps: []template.Step{{Type: "COPY", Args: []string{"../x", "/a"}, FilesHash: strings.Repeat("ab", 32)}}}, "leaves the build context"},
		{"bad env", template.BuildSpec{Steps: []template.Step{{Type: "ENV", Args: []string{"1X", "v"}}}}, "invalid variable name"},
		{"odd env", template.BuildSpec{Steps: []template.Step{{Type: "ENV", Args: []string{"X"}}}}, "expected args"},
		{"workdir joining the next line", template.BuildSpec{Steps: []template.Step{{Type: "WORKDIR", Args: []string{`/srv\`}}}}, "ends in a backslash"},
		{"bad user", template.BuildSpec{Steps: []template.Step{{Type: "USER", Args: []string{"a b"}}}}, "expected args [user]"},
		{"bad mode", template.BuildSpec{Steps: []template.Step{{Type: "COPY", Args: []string{"a", "/a", "", "999"}, FilesHash: strings.Repeat("ab", 32)}}}, "invalid mode"},
		{"both bases", template.BuildSpec{FromImage: "x", FromTemplate: "y"}, "not both"},
		{"missing parent", template.BuildSpec{FromTemplate: "nope"}, "not found"},
		{"bad image", template.BuildSpec{FromImage: "UPPER/Case"}, "invalid fromImage"},
		{"snapshot image", template.BuildSpec{FromImage: "warren/snapshot:s1"}, "made for a snapshot"},
		{"template image", template.BuildSpec{FromImage: "docker.io/warren-template/t1:b1"}, "made for a snapshot or a template"},
	} {
		wantKind(t, tc.what, reg.StartBuild(ctx, "team1", tpl.ID, b.ID, tc.spec), sandbox.KindInvalid, tc.want)
	}
}

func TestBuildQueueAndTags(t *testing.T) {
	eng := &fakeEngine{gate: make(chan struct{})}
	reg, _, _ := newRegistry(t, eng, 1)
	ctx := context.Background()
	start := func(name string) (template.Template, template.Build) {
		tpl, b, err := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: name, Tags: []string{"extra"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.StartBuild(ctx, "team1", tpl.ID, b.ID, template.BuildSpec{FromImage: "warren/base",
			Steps: []template.Step{{Type: "RUN", Args: []string{"true"}}}}); err != nil {
			t.Fatal(err)
		}
		return tpl, b
	}
	t1, b1 := start("one:v1")
	t2, b2 := start("two")
	status := func(tpl template.Template, b template.Build) template.Status {
		got, _, err := reg.Status(ctx, "team1", tpl.ID, b.ID, 0, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		return got.Status
	}
	if s1, s2 := status(t1, b1), status(t2, b2); s1 != template.StatusBuilding || s2 != template.StatusWaiting {
		t.Fatalf("with one slot: %s and %s, want building and waiting", s1, s2)
	}
	wantKind(t, "start twice", reg.StartBuild(ctx, "team1", t1.ID, b1.ID, template.BuildSpec{}), sandbox.KindConflict, "already started")
	eng.gate <- struct{}{}
	eng.gate <- struct{}{}
	waitFor(t, func() bool { return status(t1, b1) == template.StatusReady && status(t2, b2) == template.StatusReady })

	tags, _ := reg.Tags(ctx, "team1", "one")
	var names []string
	for _, tg := range tags {
		names = append(names, tg.Tag)
	}
	if strings.Join(names, ",") != "extra,v1" && strings.Join(names, ",") != "v1,extra" {
		t.Errorf("tags of one = %v, want v1 and extra", names)
	}
	if _, err := reg.Resolve(ctx, "team1", "one"); err == nil {
		t.Errorf("one has no default tag, yet resolves")
	}
	if r, err := reg.Resolve(ctx, "team1", "one:v1"); err != nil || r.BuildID != b1.ID {
		t.Errorf("Resolve(one:v1) = %+v, %v", r, err)
	}
	if _, err := reg.Resolve(ctx, "team2", "two"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("another team resolves a private template: %v", err)
	}
	if _, err := reg.AssignTags(ctx, "team1", "one:v1", []string{"prod"}); err != nil {
		t.Fatal(err)
	}
	if r, err := reg.Resolve(ctx, "team1", "one:prod"); err != nil || r.BuildID != b1.ID {
		t.Errorf("Resolve(one:prod) = %+v, %v", r, err)
	}
	if err := reg.RemoveTags(ctx, "team1", "one", []string{"prod"}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Resolve(ctx, "team1", "one:prod"); err == nil {
		t.Errorf("removed tag still resolves")
	}
	if _, err := reg.Alias(ctx, "team2", "one"); sandbox.KindOf(err) != sandbox.KindForbidden {
		t.Errorf("Alias from another team = %v, want forbidden", err)
	}
}

// A build no tag points at any more loses its image: when a rebuild takes
// its tags, and when its last tag is removed; a tagged one keeps it. A
// failed build's last layer of its own steps stays as cache until the
// next build is done, and goes with the template.
func TestSupersededBuildsPruned(t *testing.T) {
	eng := &fakeEngine{}
	reg, _, _ := newRegistry(t, eng, 1)
	ctx := context.Background()
	buildSteps := func(name string, steps ...string) (template.Build, []template.LogEntry) {
		tpl, b, err := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		spec := template.BuildSpec{FromImage: "warren/base"}
		for _, s := range steps {
			spec.Steps = append(spec.Steps, template.Step{Type: "RUN", Args: []string{s}})
		}
		if err := reg.StartBuild(ctx, "team1", tpl.ID, b.ID, spec); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool {
			got, _, err := reg.Status(ctx, "team1", tpl.ID, b.ID, 0, 0, "")
			return err == nil && got.Status.Done()
		})
		got, logs, _ := reg.Status(ctx, "team1", tpl.ID, b.ID, 0, 0, "")
		return got, logs
	}
	build := func(name string) template.Build {
		b, _ := buildSteps(name, "true")
		if b.Status != template.StatusReady {
			t.Fatalf("build %s: %s", b.ID, b.Status)
		}
		return b
	}
	removed := func() []string {
		eng.mu.Lock()
		defer eng.mu.Unlock()
		return slices.Clone(eng.removed)
	}
	b1 := build("app")
	if _, err := reg.AssignTags(ctx, "team1", "app", []string{"stable"}); err != nil {
		t.Fatal(err)
	}
	b2 := build("app")
	if got := removed(); len(got) != 0 {
		t.Fatalf("build 1 still tagged stable, yet images removed: %v", got)
	}
	b3 := build("app")
	if got := removed(); !slices.Equal(got, []string{b2.Image}) {
		t.Fatalf("after build 3 removed %v, want build 2's image %s only", got, b2.Image)
	}
	if err := reg.RemoveTags(ctx, "team1", "app", []string{"stable"}); err != nil {
		t.Fatal(err)
	}
	if got := removed(); !slices.Equal(got, []string{b2.Image, b1.Image}) {
		t.Fatalf("after untagging build 1 removed %v, want %s then %s", got, b2.Image, b1.Image)
	}
	if r, err := reg.Resolve(ctx, "team1", "app"); err != nil || r.Image != b3.Image {
		t.Errorf("Resolve(app) = %+v, %v; want build 3's image", r, err)
	}

	failed, logs := buildSteps("app", "echo cached", "exit 3")
	var want string // the layer the fake engine made for the step that passed
	for _, e := range logs {
		var n, m int
		if _, err := fmt.Sscanf(e.Message, "Step %d/%d : RUN", &n, &m); err == nil && strings.Contains(e.Message, "echo cached") {
			want = fmt.Sprintf("%012x", n)
		}
	}
	if failed.Status != template.StatusError || want == "" || failed.CacheLayer != want {
		t.Fatalf("failed build: status %s, cache layer %q; want error and %q", failed.Status, failed.CacheLayer, want)
	}
	if got := removed(); slices.Contains(got, "layer "+want) {
		t.Fatalf("the cache layer went before the next build: %v", got)
	}
	b5 := build("app")
	if got := removed(); !slices.Contains(got, "layer "+want) || !slices.Contains(got, b3.Image) {
		t.Fatalf("after the next build removed %v, want the cache layer %s and build 3's image", got, want)
	}
	if err := reg.Delete(ctx, "team1", "app"); err != nil {
		t.Fatal(err)
	}
	if got := removed(); got[len(got)-1] != b5.Image {
		t.Errorf("after delete removed %v, want build 5's image last", got)
	}
}

// The built-in templates exist for every team, as public templates: the
// SDK's Template.exists('base') asks GET /templates/aliases/base.
func TestBuiltinAliases(t *testing.T) {
	reg, _, _ := newRegistry(t, &fakeEngine{}, 2)
	for _, name := range []string{"base", "code-interpreter-v1"} {
		tpl, err := reg.Alias(context.Background(), "team1", name)
		if err != nil || tpl.ID != name || !tpl.Public {
			t.Errorf("Alias(%s) = %+v, %v; want a public template with that ID", name, tpl, err)
		}
	}
	if _, err := reg.Alias(context.Background(), "team1", "nope"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("Alias(nope) = %v, want not found", err)
	}
}

func TestFailureAndCancel(t *testing.T) {
	eng := &fakeEngine{gate: make(chan struct{}, 10)}
	reg, _, _ := newRegistry(t, eng, 2)
	ctx := context.Background()
	tpl, b, _ := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: "fails"})
	eng.gate <- struct{}{}
	reg.StartBuild(ctx, "team1", tpl.ID, b.ID, template.BuildSpec{FromImage: "warren/base", Steps: []template.Step{
		{Type: "RUN", Args: []string{"echo ok"}}, {Type: "RUN", Args: []string{"exit 4"}},
	}})
	var got template.Build
	var logs []template.LogEntry
	waitFor(t, func() bool {
		got, logs, _ = reg.Status(ctx, "team1", tpl.ID, b.ID, 0, 0, "")
		return got.Status.Done()
	})
	if got.Status != template.StatusError || got.Reason == nil || got.Reason.Step != "2" || got.Reason.Message != "failed to run command 'exit 4': exit status 4" {
		t.Errorf("failed build: %s %+v", got.Status, got.Reason)
	}
	if _, errs, _ := reg.Status(ctx, "team1", tpl.ID, b.ID, 0, 0, "error"); len(errs) != 1 || len(logs) <= 1 {
		t.Errorf("level filter: %d error entries of %d", len(errs), len(logs))
	}

	// Deleting a template cancels its running build.
	tpl2, b2, _ := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: "slow"})
	reg.StartBuild(ctx, "team1", tpl2.ID, b2.ID, template.BuildSpec{FromImage: "warren/base"})
	waitFor(t, func() bool { eng.mu.Lock(); defer eng.mu.Unlock(); return eng.builds == 2 })
	if err := reg.Delete(ctx, "team1", "slow"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reg.Build(ctx, "team1", tpl2.ID, b2.ID); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("build of a deleted template: %v", err)
	}
}

func TestRestartMarksRunningBuilds(t *testing.T) {
	eng := &fakeEngine{gate: make(chan struct{})}
	dir := t.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	reg, _ := template.New(template.Config{Store: db, Engine: eng, Dir: dir})
	reg.Start(ctx)
	done, bd, _ := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: "done"})
	close(eng.gate) // builds finish at once
	reg.StartBuild(ctx, "team1", done.ID, bd.ID, template.BuildSpec{FromImage: "warren/base"})
	waitFor(t, func() bool {
		b, _, _ := reg.Status(ctx, "team1", done.ID, bd.ID, 0, 0, "")
		return b.Status == template.StatusReady
	})
	running, br, _ := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: "running"})
	idle, bi, _ := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: "idle"})
	// A build the server was running when it died: building in the store.
	br.Status, br.Spec = template.StatusBuilding, template.BuildSpec{FromImage: "warren/base"}
	db.PutBuild(ctx, br)
	reg.Close()

	reg2, _ := template.New(template.Config{Store: db, Engine: eng, Dir: dir})
	if err := reg2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer reg2.Close()
	got, _, _ := reg2.Status(ctx, "team1", running.ID, br.ID, 0, 0, "")
	if got.Status != template.StatusError || got.Reason == nil || got.Reason.Message != "interrupted by a server restart" {
		t.Errorf("running build after restart: %s %+v", got.Status, got.Reason)
	}
	if got, _, _ := reg2.Status(ctx, "team1", idle.ID, bi.ID, 0, 0, ""); got.Status != template.StatusWaiting {
		t.Errorf("requested, unstarted build after restart: %s", got.Status)
	}
	if _, err := reg2.Resolve(ctx, "team1", "done"); err != nil {
		t.Errorf("ready template lost in the restart: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met in time")
}

// fromTemplate takes the built-in templates and the team's snapshots (by
// ID or name) as well as built templates; the code interpreter's agent
// arguments carry over to what is built on it. Another team's snapshot
// names nothing.
func TestBuildFromBuiltinsAndSnapshots(t *testing.T) {
	eng := &fakeEngine{}
	reg, db, _ := newRegistry(t, eng, 1)
	ctx := context.Background()
	snap := sandbox.Snapshot{ID: "snap1", TeamID: "team1", Name: "my-snap", Image: "warren/snapshot:snap1",
		AgentArgs: []string{"-code-interpreter"}, CreatedAt: time.Now()}
	if err := db.PutSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from, wantFrom string
		wantArgs       []string
	}{
		{"base", "FROM warren/base", nil},
		{"code-interpreter-v1", "FROM warren/code-interpreter", []string{"-code-interpreter"}},
		{"snap1", "FROM warren/snapshot:snap1", []string{"-code-interpreter"}},
		{"snap1:default", "FROM warren/snapshot:snap1", []string{"-code-interpreter"}},
		{"my-snap", "FROM warren/snapshot:snap1", []string{"-code-interpreter"}},
	} {
		name := "on-" + strings.NewReplacer(":", "-").Replace(tc.from)
		tpl, b, err := reg.RequestBuild(ctx, "team1", template.BuildRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.StartBuild(ctx, "team1", tpl.ID, b.ID, template.BuildSpec{FromTemplate: tc.from}); err != nil {
			t.Errorf("fromTemplate %s: %v", tc.from, err)
			continue
		}
		waitFor(t, func() bool {
			got, _, _ := reg.Status(ctx, "team1", tpl.ID, b.ID, 0, 0, "")
			return got.Status.Done()
		})
		eng.mu.Lock()
		dockerfile := string(eng.context["Dockerfile"])
		eng.mu.Unlock()
		if first, _, _ := strings.Cut(dockerfile, "\n"); first != tc.wantFrom {
			t.Errorf("fromTemplate %s: Dockerfile starts %q, want %q", tc.from, first, tc.wantFrom)
		}
		r, err := reg.Resolve(ctx, "team1", name)
		if err != nil {
			t.Fatalf("Resolve(%s): %v", name, err)
		}
		if !slices.Equal(r.AgentArgs, tc.wantArgs) {
			t.Errorf("fromTemplate %s: agent args %q, want %q", tc.from, r.AgentArgs, tc.wantArgs)
		}
	}
	tpl, b, _ := reg.RequestBuild(ctx, "team2", template.BuildRequest{Name: "thief"})
	for _, ref := range []string{"snap1", "my-snap"} {
		wantKind(t, "another team's snapshot "+ref, reg.StartBuild(ctx, "team2", tpl.ID, b.ID, template.BuildSpec{FromTemplate: ref}),
			sandbox.KindInvalid, "not found")
	}
}
