package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/agent/codeinterp/javakernel"
	"github.com/warrenhq/warren/internal/baseimage"
	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/sandbox"
)

const imageUsage = `Usage: warren image build [base|code-interpreter|mcp-gateway|desktop] [flags]

Subcommands:
  build   build an image sandboxes start from, with no registry. Reuses an image built
          from the same recipe unless --force.
            base               warren/base, the "base" template: Debian from an apt mirror
                               (debootstrap) imported into the Docker engine (the default)
            code-interpreter   warren/code-interpreter, the "code-interpreter-v1" template:
                               warren/base plus Python's ipykernel, numpy, pandas, matplotlib,
                               TypeScript, R with IRkernel, and OpenJDK 17 with Warren's JShell
                               kernel, built by the engine with apt-get
            mcp-gateway        warren/mcp-gateway, the "mcp-gateway" template of the SDK's
                               Sandbox.create({ mcp }): warren/base plus the mcp-gateway binary
            desktop            warren/desktop, the "desktop" template of @e2b/desktop: warren/base
                               plus Xvfb, XFCE, xdotool, scrot, firefox-esr, x11vnc and noVNC,
                               built by the engine with apt-get

Run "warren image build -h" or "warren image build code-interpreter -h" for the flags.`

func (m *Main) runImage(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprintln(m.Stdout, imageUsage)
		if len(args) == 0 {
			return usageError{"image needs a subcommand: build"}
		}
		return nil
	}
	if args[0] != "build" {
		fmt.Fprintln(m.Stderr, imageUsage)
		return usageError{fmt.Sprintf("unknown image subcommand %q", args[0])}
	}
	name, rest := "base", args[1:]
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		name, rest = rest[0], rest[1:]
	}
	switch name {
	case "base":
		return m.buildBaseImage(ctx, rest)
	case "code-interpreter":
		return m.buildCodeInterpreterImage(ctx, rest)
	case "mcp-gateway":
		return m.buildMCPGatewayImage(ctx, rest)
	case "desktop":
		return m.buildDesktopImage(ctx, rest)
	}
	fmt.Fprintln(m.Stderr, imageUsage)
	return usageError{fmt.Sprintf("unknown image %q: build base, code-interpreter, mcp-gateway or desktop", name)}
}

func (m *Main) buildBaseImage(ctx context.Context, args []string) error {
	cfg, err := m.parseImageBuild(args)
	if err != nil {
		return err
	}
	return buildImage(ctx, func(cli *client.Client) (imageBuilder, error) { return baseimage.NewBuilder(cfg, cli, m.Stdout) })
}

// imageBuilder is baseimage's Builder or LayerBuilder.
type imageBuilder interface {
	Build(ctx context.Context) (baseimage.Result, error)
}

// buildImage runs the builder newBuilder makes on a connection to the
// Docker engine.
func buildImage(ctx context.Context, newBuilder func(*client.Client) (imageBuilder, error)) error {
	cli, err := docker.Connect()
	if err != nil {
		return err
	}
	defer cli.Close()
	b, err := newBuilder(cli)
	if err != nil {
		return err
	}
	_, err = b.Build(ctx)
	return err
}

func (m *Main) buildCodeInterpreterImage(ctx context.Context, args []string) error {
	cfg, err := m.parseLayerBuild(args)
	if err != nil {
		return err
	}
	return buildImage(ctx, func(cli *client.Client) (imageBuilder, error) {
		return baseimage.NewLayerBuilder(cfg, codeInterpreterRecipe(), cli, m.Stdout)
	})
}

func (m *Main) buildMCPGatewayImage(ctx context.Context, args []string) error {
	fs := m.newFlagSet("image build mcp-gateway", "warren image build mcp-gateway [--force] [--tag NAME] [--from NAME] [--gateway PATH]",
		"Build the MCP gateway's image FROM the local base image with the Docker engine's builder:\n"+
			"the base image plus the mcp-gateway binary (scripts/build.sh builds it) in /usr/local/bin. Not root.")
	var cfg baseimage.LayerConfig
	var gateway string
	fs.BoolVar(&cfg.Force, "force", false, "build even if an image from the same recipe exists")
	fs.StringVar(&cfg.Tag, "tag", sandbox.MCPGatewayImage, "image name to tag the result with")
	fs.StringVar(&cfg.From, "from", sandbox.BaseImage, "local image to build on")
	fs.StringVar(&gateway, "gateway", siblingPath("mcp-gateway"), "the static mcp-gateway binary to put in the image")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return usageError{fmt.Sprintf("image build mcp-gateway takes no arguments, got %q", fs.Args())}
	}
	bin, err := os.ReadFile(gateway)
	if err != nil {
		return fmt.Errorf("the mcp-gateway binary: %w (build it with scripts/build.sh, or pass --gateway)", err)
	}
	return buildImage(ctx, func(cli *client.Client) (imageBuilder, error) {
		return baseimage.NewLayerBuilder(cfg, baseimage.MCPGatewayRecipe(bin), cli, m.Stdout)
	})
}

func (m *Main) buildDesktopImage(ctx context.Context, args []string) error {
	fs := m.newFlagSet("image build desktop", "warren image build desktop [--force] [--tag NAME] [--from NAME]",
		"Build the desktop template's image FROM the local base image with the Docker engine's builder,\n"+
			"apt-installing "+strings.Join(baseimage.DesktopRecipe().Packages, " ")+"\n"+
			"without their recommends. Needs the base image and the engine's access to a Debian mirror; not root.")
	var cfg baseimage.LayerConfig
	fs.BoolVar(&cfg.Force, "force", false, "build even if an image from the same recipe exists")
	fs.StringVar(&cfg.Tag, "tag", sandbox.DesktopImage, "image name to tag the result with")
	fs.StringVar(&cfg.From, "from", sandbox.BaseImage, "local image to build on")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return usageError{fmt.Sprintf("image build desktop takes no arguments, got %q", fs.Args())}
	}
	return buildImage(ctx, func(cli *client.Client) (imageBuilder, error) {
		return baseimage.NewLayerBuilder(cfg, baseimage.DesktopRecipe(), cli, m.Stdout)
	})
}

// codeInterpreterRecipe is the code interpreter image's recipe, with the
// Java kernel of the code interpreter, which owns it.
func codeInterpreterRecipe() baseimage.LayerRecipe {
	return baseimage.CodeInterpreterRecipe(baseimage.LayerFile{Path: javakernel.SourcePath, Mode: 0o644, Data: javakernel.Source}, javakernel.BuildScript())
}

// siblingPath is name in the directory of this executable, where
// scripts/build.sh puts Warren's binaries.
func siblingPath(name string) string {
	exe, err := os.Executable()
	if err != nil {
		return name
	}
	return filepath.Join(filepath.Dir(exe), name)
}

// parseLayerBuild reads the flags of image build code-interpreter.
func (m *Main) parseLayerBuild(args []string) (baseimage.LayerConfig, error) {
	fs := m.newFlagSet("image build code-interpreter", "warren image build code-interpreter [--force] [--tag NAME] [--from NAME]",
		"Build the code interpreter's image FROM the local base image with the Docker engine's builder,\n"+
			"apt-installing "+strings.Join(codeInterpreterRecipe().Packages, " ")+",\n"+
			"and compiling Warren's Java kernel.\n"+
			"Needs the base image (warren image build) and the engine's access to a Debian mirror; not root.")
	var cfg baseimage.LayerConfig
	fs.BoolVar(&cfg.Force, "force", false, "build even if an image from the same recipe exists")
	fs.StringVar(&cfg.Tag, "tag", sandbox.CodeInterpreterImage, "image name to tag the result with")
	fs.StringVar(&cfg.From, "from", sandbox.BaseImage, "local image to build on")
	if err := parseFlags(fs, args); err != nil {
		return baseimage.LayerConfig{}, err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return baseimage.LayerConfig{}, usageError{fmt.Sprintf("image build code-interpreter takes no arguments, got %q", fs.Args())}
	}
	return cfg, nil
}

// parseImageBuild reads the flags of image build; the mirror defaults to WARREN_DEBIAN_MIRROR.
func (m *Main) parseImageBuild(args []string) (baseimage.Config, error) {
	fs := m.newFlagSet("image build", "warren image build [--force] [--mirror URL] [--tag NAME] [--cache-dir DIR]",
		"Build the base image from Debian "+baseimage.DefaultRecipe().Suite+" with debootstrap and import it into the Docker engine.\n"+
			"Needs root, debootstrap and a Docker engine. Downloaded packages are cached, so a rebuild downloads nothing.")
	var cfg baseimage.Config
	fs.BoolVar(&cfg.Force, "force", false, "build even if an image from the same recipe exists")
	fs.StringVar(&cfg.Mirror, "mirror", m.Getenv("WARREN_DEBIAN_MIRROR"),
		"Debian archive URL to install from (env WARREN_DEBIAN_MIRROR; default: the host's apt sources)")
	fs.StringVar(&cfg.Tag, "tag", sandbox.BaseImage, "image name to tag the result with")
	fs.StringVar(&cfg.CacheDir, "cache-dir", "", "where downloaded packages are kept (default $XDG_CACHE_HOME/warren or ~/.cache/warren)")
	if err := parseFlags(fs, args); err != nil {
		return baseimage.Config{}, err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return baseimage.Config{}, usageError{fmt.Sprintf("image build takes no arguments, got %q", fs.Args())}
	}
	if cfg.Mirror != "" {
		if err := baseimage.ValidateMirror(cfg.Mirror); err != nil {
			return baseimage.Config{}, usageError{err.Error()}
		}
	}
	return cfg, nil
}
