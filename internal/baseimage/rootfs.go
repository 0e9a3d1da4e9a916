package baseimage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lockCache keeps two builds from sharing the cache's work trees at once.
func lockCache(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cache directory (pass --cache-dir DIR to use another): %w", err)
	}
	path := filepath.Join(dir, "build.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another warren image build is using %s (lock %s): wait for it to finish", dir, path)
	}
	return func() { f.Close() }, nil
}

// ensureDebs returns a tarball of the packages of the Debian base system, with the archive
// indices they came from (debootstrap --make-tarball), downloading it only when the cache lacks
// it. With the tarball, debootstrap installs without touching the network.
func (b *Builder) ensureDebs(ctx context.Context, mirror string) (string, error) {
	name := "debs-" + b.recipe.debsKey() + ".tgz"
	tarball := filepath.Join(b.cfg.CacheDir, name)
	if _, err := os.Stat(tarball); err == nil {
		b.out.step("using downloaded packages %s (nothing to download)", tarball)
		return tarball, nil
	}
	b.out.step("downloading the Debian base system from %s into %s (once)", mirror, tarball)
	work := filepath.Join(b.cfg.CacheDir, "download")
	if err := removeTree(work); err != nil {
		return "", err
	}
	defer removeTree(work)
	partial := tarball + ".partial"
	args := append(b.recipe.debootstrapArgs(), "--make-tarball="+partial, b.recipe.Suite, work, mirror)
	if err := b.run(ctx, "debootstrap", "debootstrap", args...); err != nil {
		os.Remove(partial)
		return "", fmt.Errorf("%w; check that %s serves Debian %s (pass --mirror URL for another)", err, mirror, b.recipe.Suite)
	}
	if err := os.Rename(partial, tarball); err != nil {
		return "", fmt.Errorf("keep downloaded packages: %w", err)
	}
	// Base systems of older recipes are not needed any more.
	old, _ := filepath.Glob(filepath.Join(b.cfg.CacheDir, "debs-*.tgz"))
	for _, f := range old {
		if filepath.Base(f) != name {
			os.Remove(f)
		}
	}
	return tarball, nil
}

// debootstrapArgs installs the base system only: debootstrap's dependency resolver ignores
// virtual packages (npm's dependencies fail to configure), so the packages go in with apt.
func (r Recipe) debootstrapArgs() []string {
	return []string{"--variant=" + r.Variant, "--components=main"}
}

// installRootfs installs Debian from the base system tarball into dir, then the recipe's
// packages with apt, and configures it.
func (b *Builder) installRootfs(ctx context.Context, debs, dir string, m Mirrors) error {
	b.out.step("installing the Debian %s base system into %s", b.recipe.Suite, dir)
	// dpkg syncs every file it writes; for a tree that becomes a tar that triples the install
	// time. debootstrap unpacks into dir without clearing it, so this setting reaches its dpkg
	// too; configure.sh removes it.
	unsafeIO := filepath.Join(dir, "etc/dpkg/dpkg.cfg.d/warren-unsafe-io")
	if err := os.MkdirAll(filepath.Dir(unsafeIO), 0o755); err != nil {
		return fmt.Errorf("prepare the image tree: %w", err)
	}
	if err := os.WriteFile(unsafeIO, []byte("force-unsafe-io\n"), 0o644); err != nil {
		return fmt.Errorf("prepare the image tree: %w", err)
	}
	args := append(b.recipe.debootstrapArgs(), "--unpack-tarball="+debs, b.recipe.Suite, dir, m.Main)
	if err := b.run(ctx, "debootstrap", "debootstrap", args...); err != nil {
		return fmt.Errorf("%w; if the cached packages are damaged, delete %s and build again", err, debs)
	}
	// debootstrap wrote a one-line sources.list; the image gets the deb822 form the host uses.
	if err := os.Remove(filepath.Join(dir, "etc/apt/sources.list")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("configure apt sources: %w", err)
	}
	sources := filepath.Join(dir, "etc/apt/sources.list.d/debian.sources")
	if err := os.WriteFile(sources, []byte(aptSourcesFile(m, b.recipe.Suite)), 0o644); err != nil {
		return fmt.Errorf("configure apt sources: %w", err)
	}
	if err := b.installPackages(ctx, dir); err != nil {
		return err
	}
	b.out.step("configuring: user 1000 with sudo, writable /usr/local and /code, cleanup")
	return b.runEnv(ctx, chrootEnv(), "configure", "chroot", dir, "/bin/sh", "-c", b.recipe.Configure)
}

// run runs a command with the environment of warren plus LC_ALL=C, streaming its output
// line by line under prefix.
func (b *Builder) run(ctx context.Context, prefix, name string, args ...string) error {
	return b.runEnv(ctx, append(os.Environ(), "LC_ALL=C"), prefix, name, args...)
}

func (b *Builder) runEnv(ctx context.Context, env []string, prefix, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	// Interrupt the whole process group: apt-get defers SIGINT while dpkg runs, and debootstrap
	// unmounts what it mounted when interrupted, not when killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 30 * time.Second
	out := b.out.prefixed(prefix)
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	out.Flush()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s interrupted: %w", name, ctx.Err())
		}
		return fmt.Errorf("%s failed (its output is above): %w", name, err)
	}
	return nil
}

// removeTree deletes dir, first unmounting whatever is mounted below it: debootstrap mounts
// /proc and /sys (and may bind-mount the host's /dev) into its target, and deleting through
// such a mount would delete the host's files.
func removeTree(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		syscall.Unmount(m, syscall.MNT_DETACH) // checked below
	}
	if mounts, err = mountsUnder(dir); err != nil {
		return err
	} else if len(mounts) > 0 {
		return fmt.Errorf("cannot unmount %s: unmount them (umount -l PATH), then delete %s", strings.Join(mounts, ", "), dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("delete work tree: %w; delete %s by hand", err, dir)
	}
	return nil
}

// mountsUnder lists the mount points below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", dir, err)
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("list mounts (is /proc mounted?): %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if strings.HasPrefix(mp, real+"/") || mp == real {
			out = append(out, mp)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out, sc.Err()
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
