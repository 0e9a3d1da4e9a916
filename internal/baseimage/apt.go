package baseimage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// chrootEnv is the environment of commands run in the image under construction.
func chrootEnv() []string {
	return []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive"}
}

// aptCacheMount is where the cache's apt directory appears inside the image while building.
const aptCacheMount = "/var/cache/warren-apt"

// installPackages installs the recipe's packages (and pending updates) with apt in a chroot of
// dir. apt's package lists and downloaded .debs live in the cache directory, bind-mounted in,
// so a rebuild downloads nothing; the lists are fetched only when the cache has none, or again
// when installing from the cached ones fails.
func (b *Builder) installPackages(ctx context.Context, dir string) (err error) {
	cache := filepath.Join(b.cfg.CacheDir, "apt")
	for _, d := range []string{"lists/partial", "archives/partial"} {
		if err := os.MkdirAll(filepath.Join(cache, d), 0o755); err != nil {
			return fmt.Errorf("create apt cache: %w", err)
		}
	}
	unmount, err := mountForApt(dir, cache)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := unmount(); err == nil {
			err = uerr
		}
	}()

	apt := func(args ...string) error {
		cmd := append([]string{dir, "apt-get", "-q", "-y",
			"-o", "Dir::State::Lists=" + aptCacheMount + "/lists",
			"-o", "Dir::Cache::Archives=" + aptCacheMount + "/archives",
			"-o", "APT::Sandbox::User=root", // the cache belongs to the host's root
			"-o", "Dpkg::Use-Pty=0",
		}, args...)
		return b.runEnv(ctx, chrootEnv(), "apt", "chroot", cmd...)
	}
	install := func() error {
		if err := apt("dist-upgrade"); err != nil {
			return err
		}
		return apt(append([]string{"install", "--no-install-recommends"}, b.recipe.Packages...)...)
	}

	haveLists, _ := filepath.Glob(filepath.Join(cache, "lists", "*Packages*"))
	if len(haveLists) == 0 {
		b.out.step("downloading apt package lists into %s", cache)
		if err := apt("update"); err != nil {
			return err
		}
	}
	b.out.step("installing %d packages and pending updates with apt (downloaded .debs are kept in %s)", len(b.recipe.Packages), cache)
	if err := install(); err != nil {
		if len(haveLists) == 0 || ctx.Err() != nil {
			return err
		}
		b.out.step("installing from the cached package lists failed: fetching them again and retrying")
		if err := apt("update"); err != nil {
			return err
		}
		if err := install(); err != nil {
			return err
		}
	}
	// Keep the cache to what the current lists still name.
	return apt("autoclean")
}

// mountForApt mounts /proc (maintainer scripts expect it) and the apt cache into dir; unmount
// undoes both and is safe to call after a failure.
func mountForApt(dir, cache string) (unmount func() error, err error) {
	proc := filepath.Join(dir, "proc")
	mnt := filepath.Join(dir, aptCacheMount)
	unmount = func() error {
		var errs []error
		for _, p := range []string{mnt, proc} {
			if err := syscall.Unmount(p, 0); err != nil && !errors.Is(err, syscall.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			}
		}
		if err := os.Remove(mnt); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return nil, fmt.Errorf("prepare apt cache mount: %w", err)
	}
	if err := syscall.Mount("proc", proc, "proc", 0, ""); err != nil {
		return nil, fmt.Errorf("mount /proc in the image tree (needs root, and mount rights when in a container): %w", err)
	}
	if err := syscall.Mount(cache, mnt, "", syscall.MS_BIND, ""); err != nil {
		unmount()
		return nil, fmt.Errorf("bind-mount the apt cache into the image tree: %w", err)
	}
	return unmount, nil
}
