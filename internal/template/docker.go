package template

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Engine is what the builder needs from a container engine.
type Engine interface {
	// Build builds the Dockerfile in the context tar and tags the result;
	// each line of the engine's output goes to out as it comes. A failed
	// step returns a *BuildFailure.
	Build(ctx context.Context, contextTar io.Reader, tag string, noCache bool, out func(line string)) error
	// InspectImage returns the image the engine finds for ref, by name or
	// by ID (see sandbox.Runtime's). KindNotFound when it has none.
	InspectImage(ctx context.Context, ref string) (sandbox.Image, error)
	// ImageEnv returns an image's environment as KEY=value strings.
	ImageEnv(ctx context.Context, ref string) ([]string, error)
	RemoveImage(ctx context.Context, ref string) error
	// RemoveLayer removes an untagged image by ID (a build step's layer),
	// with its untagged parents no other image uses. A tagged image, or
	// one already gone, is left alone; one that other images build on is
	// a KindConflict error.
	RemoveLayer(ctx context.Context, id string) error
}

// BuildFailure is a build the engine ran and that failed: a command that
// exited non-zero, a missing file, an image it could not pull.
type BuildFailure struct{ Message string }

func (e *BuildFailure) Error() string { return e.Message }

// Docker is the Engine on a Docker engine, with its classic builder: one
// cached layer per Dockerfile instruction, which is what the template
// steps need, and which every engine version has.
//
// The classic builder runs each RUN step in a container with the engine's
// default capabilities (NET_RAW among them) and no way to drop any (on
// Linux the engine refuses a build's security options, so no seccomp
// profile either), and publishes no ports. What keeps a step in is its network: Network, a
// bridge the firewall covers like the sandboxes' (no host, no link-local,
// no sandbox, no other build), with the engine's NAT and DNS, so that
// package mirrors stay reachable.
type Docker struct {
	cli     *client.Client
	network string
}

// NewDocker connects to the engine named by the environment (DOCKER_HOST
// and friends), negotiating the API version. Build steps run on the
// Docker network named network (runtime/docker's EnsureBuildNetwork makes
// it); "" is the engine's default bridge, which nothing isolates: only
// for builds whose Dockerfiles are trusted.
func NewDocker(network string) (*Docker, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker engine: %w", err)
	}
	return &Docker{cli: cli, network: network}, nil
}

// Close releases the engine connection.
func (d *Docker) Close() error { return d.cli.Close() }

// Build implements Engine.
func (d *Docker) Build(ctx context.Context, contextTar io.Reader, tag string, noCache bool, out func(string)) error {
	res, err := d.cli.ImageBuild(ctx, contextTar, client.ImageBuildOptions{
		Tags:        []string{tag},
		NoCache:     noCache,
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
		NetworkMode: d.network,
	})
	if err != nil {
		return engineError(err, "the engine refused the build")
	}
	defer res.Body.Close()
	dec := json.NewDecoder(res.Body)
	var partial strings.Builder
	flush := func(final bool) {
		s := partial.String()
		for {
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				break
			}
			out(strings.TrimRight(s[:i], "\r"))
			s = s[i+1:]
		}
		partial.Reset()
		if final && s != "" {
			out(s)
			s = ""
		}
		partial.WriteString(s)
	}
	for {
		var msg jsonstream.Message
		if err := dec.Decode(&msg); err != nil {
			flush(true)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return sandbox.Wrap(sandbox.KindUnavailable, err, "lost the engine's build output")
		}
		if msg.Error != nil {
			flush(true)
			return &BuildFailure{Message: strings.TrimSpace(msg.Error.Message)}
		}
		if msg.Stream != "" {
			partial.WriteString(msg.Stream)
			flush(false)
		}
		// Pull progress: keep the status lines, not every progress tick.
		if msg.Status != "" && msg.Progress == nil {
			line := msg.Status
			if msg.ID != "" {
				line = msg.ID + ": " + line
			}
			out(line)
		}
	}
}

// InspectImage implements Engine.
func (d *Docker) InspectImage(ctx context.Context, ref string) (sandbox.Image, error) {
	res, err := d.cli.ImageInspect(ctx, ref)
	if err != nil {
		return sandbox.Image{}, engineError(err, "cannot inspect the image")
	}
	img := sandbox.Image{ID: res.ID, RepoTags: res.RepoTags, RepoDigests: res.RepoDigests}
	if res.Config != nil {
		img.Labels = res.Config.Labels
	}
	return img, nil
}

// ImageEnv implements Engine.
func (d *Docker) ImageEnv(ctx context.Context, ref string) ([]string, error) {
	res, err := d.cli.ImageInspect(ctx, ref)
	if err != nil {
		return nil, engineError(err, "cannot inspect the built image")
	}
	if res.Config == nil {
		return nil, nil
	}
	return res.Config.Env, nil
}

// RemoveImage implements Engine: it removes the reference and, with the
// image, the step layers no other image builds on. An image already gone
// is not an error.
func (d *Docker) RemoveImage(ctx context.Context, ref string) error {
	_, err := d.cli.ImageRemove(ctx, ref, client.ImageRemoveOptions{PruneChildren: true})
	if err == nil || cerrdefs.IsNotFound(err) {
		return nil
	}
	return engineError(err, "cannot remove the image")
}

// RemoveLayer implements Engine.
func (d *Docker) RemoveLayer(ctx context.Context, id string) error {
	res, err := d.cli.ImageInspect(ctx, id)
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return engineError(err, "cannot inspect the layer")
	}
	if len(res.RepoTags) > 0 {
		return nil
	}
	return d.RemoveImage(ctx, id)
}

func engineError(err error, msg string) error {
	switch {
	case cerrdefs.IsNotFound(err):
		return sandbox.Wrap(sandbox.KindNotFound, err, msg)
	case cerrdefs.IsConflict(err):
		return sandbox.Wrap(sandbox.KindConflict, err, msg)
	case client.IsErrConnectionFailed(err), cerrdefs.IsUnavailable(err):
		return sandbox.Wrap(sandbox.KindUnavailable, err, msg)
	}
	return sandbox.Wrap(sandbox.KindInternal, err, msg)
}
