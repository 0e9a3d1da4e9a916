// Package buildkit builds Warren's templates on BuildKit (a buildkitd,
// reached over gRPC) for the Kubernetes engine, where no Docker engine
// runs beside the control plane: it is the template registry's Engine.
// The template registry writes one Dockerfile per build (one instruction
// per step, so that unchanged steps come from the cache); BuildKit's
// Dockerfile frontend builds it and pushes the image to the registry the
// nodes pull from (internal/registry), which also answers for images.
//
// Base images are taken from that registry by digest (the Dockerfile
// frontend's named contexts), so buildkitd never pulls from elsewhere
// and a base cannot change under a build by a retag. Its output is turned
// into the lines of Docker's classic builder ("Step N/M : ...", " --->
// Using cache"), which the template registry reads for its log and to
// tell which step failed.
//
// It does not run buildkitd (deploy/kubernetes/buildkitd.yaml does), nor
// isolate the build steps' network (buildkitd's pod does).
package buildkit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/moby/buildkit/client"
	"github.com/tonistiigi/fsutil"
	"golang.org/x/sync/errgroup"

	"github.com/warrenhq/warren/internal/registry"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Config is how to reach buildkitd and where its images go.
type Config struct {
	// Addr is buildkitd's address: tcp://host:port or unix:///path.
	// Required.
	Addr string
	// Images is the registry built images are pushed to and base images
	// taken from. Required.
	Images *registry.Store
	// RegistryHost is that registry's host[:port] as buildkitd reaches
	// it; "" = Images' own host.
	RegistryHost string
	// Dir is where build contexts are unpacked for the time of a build.
	// "" = the system's temporary directory.
	Dir string
}

// Builder builds templates on a buildkitd.
type Builder struct {
	cfg Config
	cli *client.Client
}

// New returns a Builder of buildkitd at cfg.Addr; the connection is made
// on first use.
func New(ctx context.Context, cfg Config) (*Builder, error) {
	if cfg.Addr == "" || cfg.Images == nil {
		return nil, errors.New("buildkit: Addr and Images are required")
	}
	if cfg.RegistryHost == "" {
		cfg.RegistryHost = cfg.Images.Host()
	}
	cli, err := client.New(ctx, cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("buildkit: %w", err)
	}
	return &Builder{cfg: cfg, cli: cli}, nil
}

// Close closes the connection to buildkitd.
func (b *Builder) Close() error { return b.cli.Close() }

// Ping reports buildkitd's version, or why it does not answer.
func (b *Builder) Ping(ctx context.Context) (string, error) {
	info, err := b.cli.Info(ctx)
	if err != nil {
		return "", sandbox.Wrap(sandbox.KindUnavailable, err, "buildkitd at "+b.cfg.Addr+" does not answer")
	}
	return info.BuildkitVersion.Version, nil
}

// Build builds the Dockerfile of contextTar and pushes the image to the
// registry as tag; out gets the build's output in the classic builder's
// lines. A failed step is a *sandbox.BuildFailure.
func (b *Builder) Build(ctx context.Context, contextTar io.Reader, tag string, noCache bool, out func(line string)) error {
	if b.cfg.Dir != "" {
		if err := os.MkdirAll(b.cfg.Dir, 0o700); err != nil {
			return sandbox.Wrap(sandbox.KindInternal, err, "cannot prepare the build context")
		}
	}
	dir, err := os.MkdirTemp(b.cfg.Dir, "buildkit-context-")
	if err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "cannot prepare the build context")
	}
	defer os.RemoveAll(dir)
	if err := unpack(contextTar, dir); err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "cannot unpack the build context")
	}
	dockerfile, err := os.ReadFile(dir + "/Dockerfile")
	if err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "the build context has no Dockerfile")
	}
	instrs := instructions(string(dockerfile))
	attrs := map[string]string{"filename": "Dockerfile"}
	if noCache {
		attrs["no-cache"] = ""
	}
	for _, base := range bases(instrs) {
		// A base the registry lacks is left to the frontend, whose
		// failure to pull it becomes the build's.
		if name, err := b.pinned(ctx, base); err == nil {
			attrs["context:"+base] = "docker-image://" + name
		}
	}
	push, err := b.cfg.Images.Name(tag)
	if err != nil {
		return err
	}
	push = b.cfg.RegistryHost + strings.TrimPrefix(push, b.cfg.Images.Host())
	fs, err := fsutil.NewFS(dir)
	if err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "cannot read the build context")
	}
	opt := client.SolveOpt{
		Frontend:      "dockerfile.v0",
		FrontendAttrs: attrs,
		LocalMounts:   map[string]fsutil.FS{"context": fs, "dockerfile": fs},
		Exports: []client.ExportEntry{{Type: client.ExporterImage, Attrs: map[string]string{
			"name": push, "push": "true", "registry.insecure": "true",
		}}},
	}
	status := make(chan *client.SolveStatus)
	tr := newTranslator(instrs, out)
	var g errgroup.Group
	g.Go(func() error {
		for s := range status {
			tr.status(s)
		}
		return nil
	})
	_, err = b.cli.Solve(ctx, nil, opt, status)
	g.Wait()
	tr.flush()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	tr.stopped(err)
	if msg := tr.failure(); msg != "" {
		return &sandbox.BuildFailure{Message: msg}
	}
	return &sandbox.BuildFailure{Message: classicMessage(err.Error())}
}

// pinned names base by digest in the registry, as buildkitd reaches it.
func (b *Builder) pinned(ctx context.Context, base string) (string, error) {
	img, err := b.cfg.Images.InspectImage(ctx, base)
	if err != nil {
		return "", err
	}
	if len(img.RepoDigests) == 0 {
		return "", sandbox.Errorf(sandbox.KindNotFound, "no digest of %s", base)
	}
	return b.cfg.RegistryHost + strings.TrimPrefix(img.RepoDigests[0], b.cfg.Images.Host()), nil
}

// InspectImage returns the registry's image ref.
func (b *Builder) InspectImage(ctx context.Context, ref string) (sandbox.Image, error) {
	return b.cfg.Images.InspectImage(ctx, ref)
}

// ImageEnv returns the environment of the registry's image ref.
func (b *Builder) ImageEnv(ctx context.Context, ref string) ([]string, error) {
	return b.cfg.Images.ImageEnv(ctx, ref)
}

// RemoveImage removes a built image from the registry; one already gone
// is no error. BuildKit's cache of its steps is buildkitd's to prune.
func (b *Builder) RemoveImage(ctx context.Context, ref string) error {
	err := b.cfg.Images.RemoveImage(ctx, ref)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return nil
	}
	return err
}

// RemoveLayer does nothing: BuildKit's steps leave no images behind (the
// template registry records none: no "--->" lines).
func (b *Builder) RemoveLayer(ctx context.Context, id string) error { return nil }

// lines calls out for each line of data.
func lines(data []byte, out func(string)) {
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		out(strings.TrimRight(sc.Text(), "\r"))
	}
}
