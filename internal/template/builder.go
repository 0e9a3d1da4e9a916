package template

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/distribution/reference"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// e2bBaseImages are E2B's default base image, which the SDK sends when a
// template names none; here it means Config.BaseImage.
var e2bBaseImages = map[string]bool{"e2bdev/base": true, "e2bdev/base:latest": true, "docker.io/e2bdev/base": true}

func (b *Build) started() bool { return b.Spec.FromImage != "" || b.Spec.FromTemplate != "" }

// StartBuild starts a build RequestBuild registered, with the steps in
// spec. It checks the whole request first: a bad step or a file that was
// not uploaded is refused before anything runs. The build runs at once
// when fewer than MaxConcurrentBuilds run, else it waits in the queue.
func (r *Registry) StartBuild(ctx context.Context, team, templateID, buildID string, spec BuildSpec) error {
	t, b, err := r.Build(ctx, team, templateID, buildID)
	if err != nil {
		return err
	}
	if b.started() || b.Status != StatusWaiting {
		return sandbox.Errorf(sandbox.KindConflict, "build '%s' was already started", buildID)
	}
	if spec.FromImage != "" && spec.FromTemplate != "" {
		return sandbox.Errorf(sandbox.KindInvalid, "give fromImage or fromTemplate, not both")
	}
	if spec.FromImage == "" && spec.FromTemplate == "" {
		spec.FromImage = r.cfg.BaseImage
	}
	if e2bBaseImages[spec.FromImage] {
		spec.FromImage = r.cfg.BaseImage
	}
	if spec.FromImage != "" && spec.FromImage != r.cfg.BaseImage {
		if spec.FromImage, err = r.checkFromImage(ctx, spec.FromImage); err != nil {
			return err
		}
	}
	if spec.FromTemplate != "" {
		if _, err := r.parent(ctx, team, spec.FromTemplate); err != nil {
			return sandbox.Errorf(sandbox.KindInvalid, "fromTemplate '%s': %s", spec.FromTemplate, sandbox.Message(err))
		}
	}
	steps, err := checkSteps(spec.Steps)
	if err != nil {
		return err
	}
	for i, s := range steps {
		if c, ok := s.act.(copyStep); ok && !r.uploads.present(team, c.filesHash) {
			return sandbox.Errorf(sandbox.KindInvalid, "step %d (COPY %s): the files with hash %s were not uploaded", i+1, c.src, c.filesHash)
		}
	}
	b.Spec = spec
	b.UpdatedAt = time.Now().UTC()
	r.enqueue(ctx, t, b)
	return nil
}

// checkFromImage checks a client's fromImage and returns it in full
// ("docker.io/library/python:3.12"), the form the build's FROM takes: the
// engine resolves that by name only, and pulls what it lacks, where a
// bare "39" would also be the prefix of an image ID to it. An image the
// engine has must be named by the reference (one of its own) and not be
// Warren's: a team builds on a template with fromTemplate, and on no
// snapshot.
func (r *Registry) checkFromImage(ctx context.Context, ref string) (string, error) {
	named, err := sandbox.ParseImageRef(ref)
	if err != nil {
		return "", sandbox.Errorf(sandbox.KindInvalid, "invalid fromImage '%s': %s", ref, sandbox.Message(err))
	}
	ownImage := sandbox.Errorf(sandbox.KindInvalid,
		"fromImage '%s' is an image Warren made for a snapshot or a template: to build on a template, use fromTemplate with its name", ref)
	if sandbox.OwnImage(reference.FamiliarName(named)) {
		return "", ownImage
	}
	img, err := r.cfg.Engine.InspectImage(ctx, named.String())
	switch {
	case sandbox.KindOf(err) == sandbox.KindNotFound:
		return named.String(), nil
	case err != nil:
		return "", err
	case !img.NamedBy(named) || img.Warrens():
		return "", ownImage
	}
	return named.String(), nil
}

// enqueue saves b as building when a slot is free, else as waiting, and
// runs it in the background.
func (r *Registry) enqueue(ctx context.Context, t Template, b Build) {
	bctx, cancel := context.WithCancel(r.ctx)
	rb := &runningBuild{templateID: t.ID, cancel: cancel, done: make(chan struct{})}
	r.mu.Lock()
	r.running[b.ID] = rb
	r.mu.Unlock()
	acquired := false
	select {
	case r.sem <- struct{}{}:
		acquired = true
		b.Status = StatusBuilding
	default:
		b.Status = StatusWaiting
	}
	if err := r.store.PutBuild(ctx, b); err != nil {
		r.log.Error("cannot save build", logkey.Build, b.ID, "err", err)
	}
	r.wg.Go(func() {
		defer func() {
			cancel()
			r.mu.Lock()
			delete(r.running, b.ID)
			r.mu.Unlock()
			close(rb.done)
		}()
		if !acquired {
			r.appendLog(b.ID, "info", "", "Waiting for a build slot")
			select {
			case r.sem <- struct{}{}:
			case <-bctx.Done():
				r.finish(context.Background(), &b, &Reason{Message: "build cancelled"})
				return
			}
			b.Status = StatusBuilding
			b.UpdatedAt = time.Now().UTC()
			r.store.PutBuild(context.Background(), b)
		}
		defer func() { <-r.sem }()
		r.run(bctx, t, b)
	})
}

// run builds b and records the outcome.
func (r *Registry) run(ctx context.Context, t Template, b Build) {
	start := time.Now()
	log := r.log.With(logkey.Template, t.ID, logkey.Build, b.ID)
	log.Info("build started")
	r.appendLog(b.ID, "info", stepBase, fmt.Sprintf("Building template %s (build %s)", t.ID, b.ID))
	res, reason := r.buildImage(ctx, t, b)
	if reason != nil {
		if ctx.Err() != nil {
			reason = &Reason{Message: "build cancelled", Step: reason.Step}
		}
		b.CacheLayer = res.lastLayer
		r.appendLog(b.ID, "error", reason.Step, reason.Message)
		log.Info("build failed", "reason", reason.Message)
		r.finish(context.Background(), &b, reason)
		return
	}
	b.Image, b.User, b.Workdir, b.Env, b.AgentArgs = res.image, res.user, res.workdir, res.env, res.agentArgs
	b.StartCmd, b.ReadyCmd = b.Spec.StartCmd, b.Spec.ReadyCmd
	r.appendLog(b.ID, "info", stepFinalize, fmt.Sprintf("Build finished in %s", time.Since(start).Round(time.Millisecond)))
	r.finish(context.Background(), &b, nil)
	log.Info("build ready", logkey.Image, b.Image, "took", time.Since(start))
	r.prune(ctx, t.ID, b.ID)
}

// finish records the end of a build; a ready build gets its tags.
func (r *Registry) finish(ctx context.Context, b *Build, reason *Reason) {
	now := time.Now().UTC()
	b.Status, b.Reason, b.UpdatedAt, b.FinishedAt = StatusReady, reason, now, now
	if reason != nil {
		b.Status = StatusError
	}
	if err := r.store.PutBuild(ctx, *b); err != nil {
		r.log.Error("cannot save build", logkey.Build, b.ID, "err", err)
	}
	if reason != nil {
		return
	}
	for _, tag := range b.Tags {
		if err := r.store.SetTag(ctx, b.TemplateID, Tag{Tag: tag, BuildID: b.ID, CreatedAt: now}); err != nil {
			r.log.Error("cannot tag build", logkey.Build, b.ID, "tag", tag, "err", err)
		}
	}
}

func (r *Registry) appendLog(buildID, level, step, msg string) {
	e := LogEntry{Time: time.Now().UTC(), Level: level, Message: msg, Step: step}
	if err := r.store.AppendBuildLog(context.Background(), buildID, e); err != nil {
		r.log.Warn("cannot append build log", logkey.Build, buildID, "err", err)
	}
}

type built struct {
	image, user, workdir string
	env                  map[string]string
	agentArgs            []string
	// lastLayer is the engine's layer of the last of the template's own
	// steps that completed, set also when the build fails.
	lastLayer string
}

// buildImage prepares the build context, runs the engine and returns the
// image, or the reason it failed.
func (r *Registry) buildImage(ctx context.Context, t Template, b Build) (built, *Reason) {
	base, err := r.baseState(ctx, b)
	if err != nil {
		return built{}, &Reason{Message: sandbox.Message(err), Step: stepBase}
	}
	dir := filepath.Join(r.cfg.Dir, "template-builds", b.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return built{}, &Reason{Message: "cannot prepare the build context", Step: stepBase}
	}
	defer os.RemoveAll(dir)
	// Checked when the build started; a build saved by another version of
	// Warren may have steps this one does not take.
	steps, err := checkSteps(b.Spec.Steps)
	if err != nil {
		return built{}, &Reason{Message: sandbox.Message(err), Step: stepBase}
	}
	copies := map[int]copySource{}
	modes := map[string]int64{}
	for i, s := range steps {
		c, ok := s.act.(copyStep)
		if !ok {
			continue
		}
		cs, err := r.prepareCopy(b.TeamID, dir, i, c)
		if err != nil {
			return built{}, &Reason{Message: copyFailed(sandbox.Message(err)), Step: strconv.Itoa(i + 1)}
		}
		copies[i] = cs
		maps.Copy(modes, cs.Modes)
	}
	p := translate(base, steps, copies, b.ID)
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(p.Dockerfile), 0o600); err != nil {
		return built{}, &Reason{Message: "cannot prepare the build context", Step: stepBase}
	}
	image := imageRef(t.ID, b.ID)
	step := stepBase
	instr := -1 // the instruction the engine is at
	var lastLayer string
	out := func(line string) {
		if m := stepLine.FindStringSubmatch(line); m != nil {
			if n, _ := strconv.Atoi(m[1]); n >= 1 && n <= len(p.StepOf) {
				step, instr = p.StepOf[n-1], n-1
			}
		}
		// The base steps' layers are the base image's or shared with
		// every template built on it: never this build's to remove.
		if m := layerLine.FindStringSubmatch(line); m != nil && step != stepBase {
			lastLayer = m[1]
		}
		if msg, keep := logLine(line); keep {
			r.appendLog(b.ID, "info", step, msg)
		}
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeContext(pw, dir, modes)) }()
	err = r.cfg.Engine.Build(ctx, pr, image, b.Spec.Force, out)
	pr.Close()
	if err != nil {
		failed := built{lastLayer: lastLayer}
		var bf *sandbox.BuildFailure
		if errors.As(err, &bf) {
			msg := bf.Message
			if instr >= 0 {
				msg = p.Instrs[instr].failure(msg)
			}
			return failed, &Reason{Message: msg, Step: step}
		}
		r.log.Error("build error", logkey.Build, b.ID, "err", err)
		return failed, &Reason{Message: "build failed: " + sandbox.Message(err), Step: step}
	}
	env := p.Env
	if len(env) > 0 {
		// Values as the image has them, with variables expanded.
		if kv, err := r.cfg.Engine.ImageEnv(ctx, image); err == nil {
			for _, e := range kv {
				k, v, _ := strings.Cut(e, "=")
				if _, ok := env[k]; ok {
					env[k] = v
				}
			}
		}
	}
	return built{image: image, user: p.User, workdir: p.Workdir, env: env, agentArgs: base.AgentArgs}, nil
}

// imageRef names a build's image.
func imageRef(templateID, buildID string) string {
	return sandbox.TemplateRepo + "/" + templateID + ":" + buildID
}

// baseState is where b starts: a plain image, or another template.
func (r *Registry) baseState(ctx context.Context, b Build) (baseState, error) {
	if b.Spec.FromTemplate == "" {
		return imageBase(b.Spec.FromImage, nil), nil
	}
	return r.parent(ctx, b.TeamID, b.Spec.FromTemplate)
}

// parent is where a build fromTemplate ref starts, for team: a built-in
// template, a template built here (its own or a public one), or one of the
// team's snapshots, by ID or name.
func (r *Registry) parent(ctx context.Context, team, ref string) (baseState, error) {
	if src, ok := r.cfg.Builtins[ref]; ok {
		return imageBase(src.Image, src.AgentArgs), nil
	}
	t, err := r.resolve(ctx, team, ref)
	if err == nil {
		return baseState{Image: t.Image, User: t.User, Workdir: t.Workdir, Env: t.Env, AgentArgs: t.AgentArgs}, nil
	}
	if sandbox.KindOf(err) != sandbox.KindNotFound || r.cfg.Snapshots == nil {
		return baseState{}, err
	}
	if sn, ok, serr := r.snapshot(ctx, team, ref); serr != nil {
		return baseState{}, serr
	} else if ok {
		return imageBase(sn.Image, sn.AgentArgs), nil
	}
	return baseState{}, err
}

// snapshot finds team's snapshot by ID (with or without the ":default"
// tag the SDK may add) or by name.
func (r *Registry) snapshot(ctx context.Context, team, ref string) (sandbox.Snapshot, bool, error) {
	id := strings.TrimSuffix(ref, ":"+DefaultTag)
	if sn, err := r.cfg.Snapshots.GetSnapshot(ctx, id); err == nil && sn.TeamID == team {
		return sn, true, nil
	}
	snaps, err := r.cfg.Snapshots.ListSnapshots(ctx, team, "")
	if err != nil {
		return sandbox.Snapshot{}, false, err
	}
	for _, sn := range snaps {
		if sn.Name != "" && sn.Name == ref {
			return sn, true, nil
		}
	}
	return sandbox.Snapshot{}, false, nil
}

// imageBase is the start of a build on a plain image, whose sandboxes run
// the agent with agentArgs: Warren's default build user is made when the
// image lacks it.
func imageBase(image string, agentArgs []string) baseState {
	return baseState{Image: image, User: DefaultBuildUser, Workdir: DefaultBuildWorkdir, EnsureUser: true, AgentArgs: agentArgs}
}

var stepLine = regexp.MustCompile(`^Step (\d+)/(\d+) : `)

// layerLine is the engine's line naming the layer a step made (or found
// in its cache).
var layerLine = regexp.MustCompile(`^ ---> ([0-9a-f]{12,64})$`)

// noise are engine output lines that say nothing to a template's author.
var noise = regexp.MustCompile(`^( ---> [0-9a-f]{12}$| ---> Running in |Removing intermediate container |Successfully built |Successfully tagged |Sending build context)`)

// logLine turns an engine output line into a log message.
func logLine(line string) (string, bool) {
	if strings.TrimSpace(line) == "" || noise.MatchString(line) {
		return "", false
	}
	if line == " ---> Using cache" {
		return "CACHED", true
	}
	return line, true
}
