package baseimage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/distribution/reference"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Config says what to build and where to keep the download cache.
type Config struct {
	// Tag names the image; empty means sandbox.BaseImage. ":latest" is implied when it has no tag.
	Tag string
	// Mirror is the Debian archive to install from; empty means the first archive serving the
	// recipe's suite in the host's apt configuration.
	Mirror string
	// CacheDir keeps the downloaded packages (one tarball per package set) and the build's work
	// tree; empty means DefaultCacheDir.
	CacheDir string
	// Force builds even when an image from the same recipe exists; the download cache is still used.
	Force bool
}

// DefaultCacheDir is "warren" in the user's cache directory ($XDG_CACHE_HOME or ~/.cache).
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a cache directory: %w; pass --cache-dir DIR", err)
	}
	return filepath.Join(dir, "warren"), nil
}

// normalize checks c and fills in defaults; the returned Tag is fully qualified ("name:tag").
func (c Config) normalize() (Config, error) {
	if c.Tag == "" {
		c.Tag = sandbox.BaseImage
	}
	named, err := reference.ParseNormalizedNamed(c.Tag)
	if err != nil {
		return Config{}, fmt.Errorf("tag %q is not a valid image name (e.g. warren/base or warren/base:dev): %w", c.Tag, err)
	}
	if _, ok := named.(reference.Digested); ok {
		return Config{}, fmt.Errorf("tag %q has a digest: give a name and an optional :tag", c.Tag)
	}
	c.Tag = reference.FamiliarString(reference.TagNameOnly(named))
	if c.Mirror != "" {
		if err := ValidateMirror(c.Mirror); err != nil {
			return Config{}, err
		}
	}
	if c.CacheDir == "" {
		if c.CacheDir, err = DefaultCacheDir(); err != nil {
			return Config{}, err
		}
	}
	if c.CacheDir, err = filepath.Abs(c.CacheDir); err != nil {
		return Config{}, fmt.Errorf("cache directory %q: %w", c.CacheDir, err)
	}
	return c, nil
}

// Result says which image the build left under the tag.
type Result struct {
	Tag     string
	ImageID string
	Recipe  string // the recipe hash, also in the image's RecipeLabel
	Reused  bool   // an image from the same recipe existed; nothing was built
}

// Builder builds the base image on a Docker engine. It needs root (debootstrap and chroot) only
// when it actually builds; finding a reusable image needs just the engine.
type Builder struct {
	cfg     Config
	recipe  Recipe
	aptRoot fs.FS // where apt's configuration is read from: the host's "/"
	docker  *client.Client
	out     *progress
}

// NewBuilder checks cfg; the builder works on the engine connection docker
// (runtime/docker's Connect), which the caller closes. Progress lines go to
// out.
func NewBuilder(cfg Config, docker *client.Client, out io.Writer) (*Builder, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	return &Builder{cfg: cfg, recipe: DefaultRecipe(), aptRoot: os.DirFS("/"), docker: docker, out: newProgress(out)}, nil
}

// Build makes sure an image from the current recipe is tagged cfg.Tag, building it unless one
// exists (or cfg.Force is set).
func (b *Builder) Build(ctx context.Context) (Result, error) {
	hash := b.recipe.Hash()
	b.out.step("recipe %s: Debian %s (%s) + %d packages, tag %s", hash, b.recipe.Suite, b.recipe.Variant, len(b.recipe.Packages), b.cfg.Tag)
	if err := b.pingDocker(ctx); err != nil {
		return Result{}, err
	}
	if !b.cfg.Force {
		if res, ok, err := b.reuse(ctx, hash); err != nil || ok {
			return res, err
		}
	}
	if err := checkBuildHost(); err != nil {
		return Result{}, err
	}
	mirrors, err := FindMirrors(b.aptRoot, b.recipe.Suite, b.cfg.Mirror)
	if err != nil {
		return Result{}, err
	}
	b.out.step("mirror %s (security: %s)", mirrors.Main, orNone(mirrors.Security))

	unlock, err := lockCache(b.cfg.CacheDir)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	debs, err := b.ensureDebs(ctx, mirrors.Main)
	if err != nil {
		return Result{}, err
	}
	id, err := b.buildImage(ctx, debs, mirrors, hash)
	if err != nil {
		return Result{}, err
	}
	b.out.step("done: %s is %s (recipe %s)", b.cfg.Tag, shortID(id), hash)
	return Result{Tag: b.cfg.Tag, ImageID: id, Recipe: hash}, nil
}

// buildImage installs and configures the image tree in the cache's work directory, imports
// it, and removes the tree whatever happens.
func (b *Builder) buildImage(ctx context.Context, debs string, mirrors Mirrors, hash string) (id string, err error) {
	rootfs := filepath.Join(b.cfg.CacheDir, "rootfs")
	if err := removeTree(rootfs); err != nil { // left by an interrupted build
		return "", err
	}
	defer func() {
		b.out.step("removing the work tree %s", rootfs)
		if rerr := removeTree(rootfs); rerr != nil {
			b.out.step("warning: %v", rerr)
		}
	}()
	if err := b.installRootfs(ctx, debs, rootfs, mirrors); err != nil {
		return "", err
	}
	return b.importRootfs(ctx, rootfs, hash)
}

// checkBuildHost says what to do when the build cannot run here.
func checkBuildHost() error {
	if os.Geteuid() != 0 {
		return errors.New("building the base image needs root (debootstrap and chroot): run as root, e.g. sudo warren image build")
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return errors.New("debootstrap is not installed: apt-get install debootstrap (or run scripts/ensure-docker.sh, which installs it)")
	}
	for _, tool := range []string{"chroot", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not in PATH: install coreutils and tar", tool)
		}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
