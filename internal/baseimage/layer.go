package baseimage

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

// LayerRecipe is an image made on the Docker engine from a local parent
// image (the base image) by apt-installing Debian packages and adding
// files, with the engine's classic builder: no registry, nothing pulled.
type LayerRecipe struct {
	// Packages are installed without their recommends; none = no apt-get.
	Packages []string
	// Excludes are paths (globs) of the packages' files that dpkg does
	// not install, then or later, as dpkg's path-exclude. Default none.
	Excludes []string
	// Files are added after the packages.
	Files []LayerFile
	// Script is a shell script run last, e.g. to compile one of Files.
	// Default none.
	Script string
}

// LayerFile is a file a LayerRecipe adds to the image.
type LayerFile struct {
	Path string // absolute, in the image
	Mode int64  // permission bits
	Data []byte
}

// MCPGatewayRecipe is the recipe for warren/mcp-gateway: the base image
// (which has what stdio MCP servers are run with: node and npm, python3
// with pip and venv, git) plus the gateway binary at
// /usr/local/bin/mcp-gateway, where E2B's SDK runs it.
func MCPGatewayRecipe(gateway []byte) LayerRecipe {
	return LayerRecipe{Files: []LayerFile{{Path: "/usr/local/bin/mcp-gateway", Mode: 0o755, Data: gateway}}}
}

// CodeInterpreterRecipe is the recipe for warren/code-interpreter: what
// the agent's code interpreter needs for Python (ipykernel, with numpy,
// pandas and matplotlib, which E2B's image has too), JavaScript and
// TypeScript (node is in the base image; typescript compiles TS), R
// (R itself and IRkernel; bash needs nothing more), and Java (the JDK,
// for JShell and javac, and Warren's JShell kernel compiled with it,
// about 200 MB in all; the JDK's jmods, 75 MB that only jlink reads, are
// left out).
//
// The kernel is the code interpreter's, which this package does not
// know: javaKernel is its source, added after the packages, and compile
// the script that compiles it there (cmd/warren passes those of package
// javakernel).
//
// R comes without its recommends, r-recommended (Matrix, lattice, mgcv
// and the other recommended packages: about 27 MB more) and r-base-dev (a
// C, C++ and Fortran toolchain to build packages from source: well over
// 100 MB, as the image has no compiler). Base R and IRkernel add 60 MB.
//
// python3-munkres comes first on purpose: matplotlib needs fonttools,
// which needs "python3-scipy | python3-munkres"; with munkres already
// chosen apt does not install scipy, whose pythran dependency pulls in
// g++, Boost and the Python headers (about 700 MB).
func CodeInterpreterRecipe(javaKernel LayerFile, compile string) LayerRecipe {
	return LayerRecipe{
		Packages: []string{
			"python3-munkres",
			"python3-ipykernel", "python3-matplotlib-inline", "python3-numpy", "python3-pandas", "python3-matplotlib",
			"nodejs", "node-typescript",
			"r-base-core", "r-cran-irkernel",
			"openjdk-17-jdk-headless",
		},
		Excludes: []string{"/usr/lib/jvm/*/jmods/*"},
		Files:    []LayerFile{javaKernel},
		Script:   compile,
	}
}

// Dockerfile is the build's Dockerfile, FROM the parent image; file i
// is files/<i> in the build context.
func (r LayerRecipe) Dockerfile(from string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "FROM %s\n", from)
	if len(r.Packages) > 0 {
		b.WriteString("RUN ")
		if len(r.Excludes) > 0 {
			var globs []string
			for _, g := range r.Excludes {
				globs = append(globs, "'"+strings.ReplaceAll(g, "'", `'\''`)+"'")
			}
			fmt.Fprintf(&b, "printf 'path-exclude=%%s\\n' %s > /etc/dpkg/dpkg.cfg.d/warren-excludes \\\n && ", strings.Join(globs, " "))
		}
		fmt.Fprintf(&b, `apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends %s \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*
`, strings.Join(r.Packages, " "))
	}
	for i, f := range r.Files {
		fmt.Fprintf(&b, "COPY files/%d %s\n", i, f.Path)
	}
	if r.Script != "" {
		// The JSON form of RUN takes the script as one sh -c argument, so
		// that it needs no quoting here.
		script, _ := json.Marshal([]string{"/bin/sh", "-c", r.Script})
		fmt.Fprintf(&b, "RUN %s\n", script)
	}
	return b.String()
}

// hash identifies the recipe on this parent image: rebuilding the parent
// changes it, so the layer is rebuilt on top of the new one, and so does
// a new version of a file (a rebuilt gateway binary).
func (r LayerRecipe) hash(parentID string) string {
	type file struct {
		Path   string
		Mode   int64
		SHA256 [32]byte
	}
	files := make([]file, len(r.Files))
	for i, f := range r.Files {
		files[i] = file{f.Path, f.Mode, sha256.Sum256(f.Data)}
	}
	if len(files) == 0 && len(r.Excludes) == 0 && r.Script == "" {
		// The hash of a packages-only recipe is what it was before recipes
		// had files, so existing images are reused.
		return shortHash(struct {
			Packages []string
			Parent   string
		}{r.Packages, parentID})
	}
	if len(r.Excludes) == 0 && r.Script == "" {
		return shortHash(struct {
			Packages []string
			Files    []file
			Parent   string
		}{r.Packages, files, parentID})
	}
	return shortHash(struct {
		Packages []string
		Excludes []string
		Files    []file
		Script   string
		Parent   string
	}{r.Packages, r.Excludes, files, r.Script, parentID})
}

// LayerConfig says what a LayerBuilder builds from and tags.
type LayerConfig struct {
	// Tag names the image; ":latest" is implied when it has no tag.
	// Required.
	Tag string
	// From is the local parent image; empty means sandbox.BaseImage.
	From string
	// Force builds even when an image from the same recipe exists.
	Force bool
}

func (c LayerConfig) normalize() (LayerConfig, error) {
	if c.From == "" {
		c.From = sandbox.BaseImage
	}
	for _, p := range []*string{&c.Tag, &c.From} {
		named, err := reference.ParseNormalizedNamed(*p)
		if err != nil {
			return LayerConfig{}, fmt.Errorf("%q is not a valid image name: %w", *p, err)
		}
		*p = reference.FamiliarString(reference.TagNameOnly(named))
	}
	return c, nil
}

// LayerBuilder builds a LayerRecipe on a Docker engine; it needs no root.
type LayerBuilder struct {
	cfg    LayerConfig
	recipe LayerRecipe
	docker *client.Client
	out    *progress
}

// NewLayerBuilder checks cfg; the builder works on the engine connection
// docker (runtime/docker's Connect), which the caller closes. Progress
// lines go to out.
func NewLayerBuilder(cfg LayerConfig, recipe LayerRecipe, docker *client.Client, out io.Writer) (*LayerBuilder, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	return &LayerBuilder{cfg: cfg, recipe: recipe, docker: docker, out: newProgress(out)}, nil
}

// Build makes sure an image from the recipe on the current parent is
// tagged cfg.Tag, building it unless one exists (or cfg.Force is set).
func (b *LayerBuilder) Build(ctx context.Context) (Result, error) {
	if err := ping(ctx, b.docker); err != nil {
		return Result{}, err
	}
	parent, err := b.docker.ImageInspect(ctx, b.cfg.From)
	if cerrdefs.IsNotFound(err) {
		return Result{}, fmt.Errorf("the parent image %s is missing: build it first with `warren image build`", b.cfg.From)
	} else if err != nil {
		return Result{}, fmt.Errorf("inspect %s: %w", b.cfg.From, err)
	}
	hash := b.recipe.hash(parent.ID)
	b.out.step("recipe %s: %s (%s) + %d packages, %d files, tag %s", hash, b.cfg.From, shortID(parent.ID), len(b.recipe.Packages), len(b.recipe.Files), b.cfg.Tag)
	if !b.cfg.Force {
		if res, ok, err := reuse(ctx, b.docker, b.out, b.cfg.Tag, hash); err != nil || ok {
			return res, err
		}
	}
	previous := ""
	if img, err := b.docker.ImageInspect(ctx, b.cfg.Tag); err == nil {
		previous = img.ID
	}
	// FROM the parent's ID: the image the hash was computed from, even if
	// the tag moves meanwhile.
	if err := b.build(ctx, b.recipe, parent.ID, hash); err != nil {
		return Result{}, err
	}
	img, err := b.docker.ImageInspect(ctx, b.cfg.Tag)
	if err != nil {
		return Result{}, fmt.Errorf("inspect the new %s: %w", b.cfg.Tag, err)
	}
	if previous != "" && previous != img.ID {
		if _, err := b.docker.ImageRemove(ctx, previous, client.ImageRemoveOptions{}); err != nil {
			b.out.step("kept the previous %s (%s): %v", b.cfg.Tag, shortID(previous), err)
		} else {
			b.out.step("removed the previous %s (%s)", b.cfg.Tag, shortID(previous))
		}
	}
	b.out.step("done: %s is %s, %d MB (recipe %s)", b.cfg.Tag, shortID(img.ID), img.Size>>20, hash)
	return Result{Tag: b.cfg.Tag, ImageID: img.ID, Recipe: hash}, nil
}

// buildContext is the tar the engine builds from: the Dockerfile and the
// recipe's files.
func buildContext(r LayerRecipe, parentID string) (*bytes.Buffer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := add("Dockerfile", 0o644, []byte(r.Dockerfile(parentID))); err != nil {
		return nil, err
	}
	for i, f := range r.Files {
		if err := add(fmt.Sprintf("files/%d", i), f.Mode, f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return &buf, nil
}

// build runs the recipe on the engine's classic builder, showing its
// output line by line.
func (b *LayerBuilder) build(ctx context.Context, recipe LayerRecipe, parentID, hash string) error {
	buf, err := buildContext(recipe, parentID)
	if err != nil {
		return err
	}
	b.out.step("building %s on the engine (minutes the first time when it apt-installs)", b.cfg.Tag)
	res, err := b.docker.ImageBuild(ctx, buf, client.ImageBuildOptions{
		Tags:        []string{b.cfg.Tag},
		Labels:      map[string]string{RecipeLabel: hash},
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return fmt.Errorf("docker build: %w", err)
	}
	defer res.Body.Close()
	lines := b.out.prefixed("build")
	defer lines.Flush()
	dec := json.NewDecoder(res.Body)
	for {
		var msg jsonstream.Message
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("docker build: read the engine's output: %w", err)
		}
		if msg.Error != nil {
			lines.Flush()
			return fmt.Errorf("docker build of %s failed: %s", b.cfg.Tag, strings.TrimSpace(msg.Error.Message))
		}
		lines.Write([]byte(msg.Stream))
	}
}
