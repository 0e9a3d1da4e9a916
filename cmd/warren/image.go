package main

import (
	"context"
	"fmt"

	"github.com/warrenhq/warren/internal/baseimage"
)

const imageUsage = `Usage: warren image build [flags]

Subcommands:
  build   build the base image sandboxes start from, with no registry: Debian from
          an apt mirror (debootstrap) imported into the Docker engine. Reuses an
          image built from the same recipe unless --force.

Run "warren image build -h" for its flags.`

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
	cfg, err := m.parseImageBuild(args[1:])
	if err != nil {
		return err
	}
	b, err := baseimage.NewBuilder(cfg, m.Stdout)
	if err != nil {
		return err
	}
	defer b.Close()
	_, err = b.Build(ctx)
	return err
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
	fs.StringVar(&cfg.Tag, "tag", baseimage.DefaultTag, "image name to tag the result with")
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
