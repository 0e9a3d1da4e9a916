package docker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Builder builds templates' images (template.Engine) on a Docker engine,
// with its classic builder: one cached layer per Dockerfile instruction,
// which is what the template steps need, and which every engine version
// has.
//
// The classic builder runs each RUN step in a container with the engine's
// default capabilities (NET_RAW among them) and no way to drop any (on
// Linux the engine refuses a build's security options, so no seccomp
// profile either), and publishes no ports. What keeps a step in is its
// network: a bridge the firewall covers like the sandboxes' (no host, no
// link-local, no sandbox, no other build; EnsureBuildNetwork), with the
// engine's NAT and DNS, so that package mirrors stay reachable.
type Builder struct {
	cli     *client.Client
	network string
	built   func() // called after every build and removal, of whatever outcome; nil: none
}

// Builder returns a Builder on the runtime's engine connection whose build
// steps run on the Docker network named network (EnsureBuildNetwork makes
// it); "" is the engine's default bridge, which nothing isolates: only for
// builds whose Dockerfiles are trusted. Closing the runtime closes it.
func (r *Runtime) Builder(network string) *Builder {
	b := NewBuilder(r.cli, network)
	b.built = r.imagesChanged
	return b
}

// NewBuilder returns a Builder on an engine connection from Connect, for
// callers that run no sandboxes; see Runtime.Builder for network. The
// caller closes cli.
func NewBuilder(cli *client.Client, network string) *Builder {
	return &Builder{cli: cli, network: network}
}

// Build builds the Dockerfile in the context tar and tags the result; each
// line of the engine's output goes to out as it comes. A failed step
// returns a *sandbox.BuildFailure.
func (b *Builder) Build(ctx context.Context, contextTar io.Reader, tag string, noCache bool, out func(string)) error {
	if b.built != nil {
		defer b.built()
	}
	res, err := b.cli.ImageBuild(ctx, contextTar, client.ImageBuildOptions{
		Tags:        []string{tag},
		NoCache:     noCache,
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
		NetworkMode: b.network,
	})
	if err != nil {
		return classify(err, "the engine refused the build")
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
			return &sandbox.BuildFailure{Message: strings.TrimSpace(msg.Error.Message)}
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

// InspectImage returns the image the engine finds for ref, by name or by
// ID, as Runtime.InspectImage does.
func (b *Builder) InspectImage(ctx context.Context, ref string) (sandbox.Image, error) {
	return inspectImage(ctx, b.cli, ref)
}

// ImageEnv returns an image's environment as KEY=value strings.
func (b *Builder) ImageEnv(ctx context.Context, ref string) ([]string, error) {
	res, err := b.cli.ImageInspect(ctx, ref)
	if err != nil {
		return nil, classify(err, "cannot inspect the built image")
	}
	if res.Config == nil {
		return nil, nil
	}
	return res.Config.Env, nil
}

// RemoveImage removes the reference and, with the image, the step layers
// no other image builds on. An image already gone is not an error.
func (b *Builder) RemoveImage(ctx context.Context, ref string) error {
	if b.built != nil {
		defer b.built()
	}
	err := removeImage(ctx, b.cli, ref)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return nil
	}
	return err
}

// RemoveLayer removes an untagged image by ID (a build step's layer), with
// its untagged parents no other image uses. A tagged image, or one already
// gone, is left alone; one that other images build on is a KindConflict
// error.
func (b *Builder) RemoveLayer(ctx context.Context, id string) error {
	img, err := inspectImage(ctx, b.cli, id)
	switch {
	case sandbox.KindOf(err) == sandbox.KindNotFound:
		return nil
	case err != nil:
		return err
	case len(img.RepoTags) > 0:
		return nil
	}
	return b.RemoveImage(ctx, id)
}
