package volume

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A volume with a size limit is its own ext4 filesystem: a sparse image
// file beside the volume's directory, loop-mounted on it. The kernel then
// refuses a write past the limit (ENOSPC) wherever it comes from, a
// sandbox's mount or the content API, and statfs tells the usage. The
// host's filesystem needs no quota support (this machine's ext4 overlay
// has none, nor XFS project quotas); the cost is one loop device per
// volume.

// imageExt ends an image's name; volume IDs have no dot, so an image
// cannot be taken for a volume's directory.
const imageExt = ".img"

// CheckLoops tells whether this host can loop-mount ext4 images, and what
// to do when it cannot; what (the error's start) says what needs them and
// how to do without.
func CheckLoops(what string) error {
	for _, tool := range []string{"mkfs.ext4", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s, which needs %s (install e2fsprogs and util-linux): %w", what, tool, err)
		}
	}
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err == nil {
		_, err = unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		ctl.Close()
	}
	if err != nil {
		return fmt.Errorf("%s, and no loop device can be had here (%v): load the loop module (modprobe loop), run as root with /dev/loop-control (in a container: privileged)", what, err)
	}
	return nil
}

// MakeImage writes an empty ext4 image at img in which mb MiB of files
// fit, and not much more. ext4's journal and inode tables take 3–12 % of a filesystem (more
// of a small one), so a first image of a guessed size is measured and
// made again with the difference. The image is sparse: it takes host
// disk only as the volume fills.
func MakeImage(img string, mb int) error {
	// ext4 keeps back 2 % of its free space, at most 4096 blocks, for
	// delayed allocation: files cannot use it.
	want := int64(mb) << 20
	want += min(want/50, 4096*4096) + 1<<20
	slack := want/100 + 1<<20 // what may fit beyond the limit
	size := want + want/16 + 4<<20
	for try := 0; ; try++ {
		free, err := mkfs(img, size, mb)
		if err != nil {
			os.Remove(img)
			return fmt.Errorf("volume image: %w", err)
		}
		if (free >= want && free <= want+slack) || (free >= want && try == 3) {
			return nil
		}
		if try == 3 {
			os.Remove(img)
			return fmt.Errorf("volume image: %d MiB fit in a %d MiB image, short of %d MiB", free>>20, size>>20, mb)
		}
		// Overhead grows with the filesystem: aim a little past want.
		size += want - free + slack/2
	}
}

// mkfs makes an ext4 filesystem of size bytes, labelled with its limit of
// mb MiB, in the file img and returns its free bytes.
func mkfs(img string, size int64, mb int) (int64, error) {
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return 0, err
	}
	// -m 0: no blocks kept back for root, the limit is the user's. Lazy
	// init: mkfs writes only the metadata it needs now. The label keeps
	// the limit, which the filesystem's own size overshoots a little.
	label := labelPrefix + strconv.Itoa(mb)
	if err := run("mkfs.ext4", "-q", "-F", "-m", "0", "-L", label, "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", img); err != nil {
		return 0, err
	}
	sb, err := readSuperblock(f)
	return sb.free, err
}

// labelPrefix starts the label of a volume's filesystem, followed by its
// limit in MiB (ext4 labels hold 16 bytes).
const labelPrefix = "warren-mb-"

type superblock struct {
	free  int64 // bytes
	label string
}

// readSuperblock reads an ext4 superblock (1024 bytes into the
// filesystem; fields little-endian, as ext4 defines them).
func readSuperblock(f *os.File) (superblock, error) {
	sb := make([]byte, 1024)
	if _, err := f.ReadAt(sb, 1024); err != nil {
		return superblock{}, fmt.Errorf("read superblock: %w", err)
	}
	if binary.LittleEndian.Uint16(sb[0x38:]) != 0xEF53 {
		return superblock{}, errors.New("read superblock: not an ext4 filesystem")
	}
	blocks := uint64(binary.LittleEndian.Uint32(sb[0x0C:])) // s_free_blocks_count_lo
	const incompat64bit = 0x80
	if binary.LittleEndian.Uint32(sb[0x60:])&incompat64bit != 0 {
		blocks |= uint64(binary.LittleEndian.Uint32(sb[0x158:])) << 32 // _hi
	}
	blockSize := int64(1024) << binary.LittleEndian.Uint32(sb[0x18:]) // s_log_block_size
	label := string(bytes.TrimRight(sb[0x78:0x88], "\x00"))           // s_volume_name
	return superblock{free: int64(blocks) * blockSize, label: label}, nil
}

// imageLimit reads the limit a volume's image was made with, in bytes.
func imageLimit(img string) (int64, error) {
	f, err := os.Open(img)
	if err != nil {
		return 0, fmt.Errorf("volume image: %w", err)
	}
	defer f.Close()
	sb, err := readSuperblock(f)
	if err != nil {
		return 0, fmt.Errorf("volume image %s: %w", filepath.Base(img), err)
	}
	mb, err := strconv.Atoi(strings.TrimPrefix(sb.label, labelPrefix))
	if err != nil || !strings.HasPrefix(sb.label, labelPrefix) {
		return 0, fmt.Errorf("volume image %s: label %q does not hold its size limit", filepath.Base(img), sb.label)
	}
	return int64(mb) << 20, nil
}

// MountImage loop-mounts img on dir, unless something is mounted there
// already (a server killed with -9 leaves its mounts), and makes the
// filesystem's root a shared drwxrwxrwt tree.
func MountImage(img, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("volume mount point: %w", err)
	}
	if on, err := IsMountPoint(dir); err != nil || on {
		return err
	}
	// mount(8) picks a free loop device and retries when another process
	// takes it first; autoclear frees the device on unmount.
	if err := run("mount", "-t", "ext4", "-o", "loop,nosuid,nodev", img, dir); err != nil {
		return fmt.Errorf("mount volume image %s: %w (check it with e2fsck -f %s)", filepath.Base(img), err, img)
	}
	// mkfs makes lost+found; a volume lists only what its users put in.
	os.Remove(filepath.Join(dir, "lost+found"))
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		Unmount(dir)
		return fmt.Errorf("volume mount point: %w", err)
	}
	return nil
}

// Unmount takes a volume's filesystem off dir. A mount still in use (a
// container being torn down holds it a moment longer) is detached: the
// kernel frees it, and its loop device, when the last user goes.
func Unmount(dir string) error {
	on, err := IsMountPoint(dir)
	if err != nil || !on {
		return err
	}
	err = unix.Unmount(dir, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err != nil {
		return fmt.Errorf("unmount volume %s: %w", filepath.Base(dir), err)
	}
	return nil
}

// IsMountPoint tells whether a filesystem is mounted on dir: statx says
// it is a mount's root (a bind of a directory onto itself too), or, on
// kernels before 5.8, its device differs from its parent's.
func IsMountPoint(dir string) (bool, error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &stx); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("volume mount point: %w", err)
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	var parent unix.Stat_t
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, fmt.Errorf("volume mount point: %w", err)
	}
	return unix.Mkdev(stx.Dev_major, stx.Dev_minor) != parent.Dev, nil
}

// bindNoSuid makes a plain volume's directory a mount of its own, nosuid
// and nodev, unless it is one already. Sandbox root is host root: a
// setuid-root program or a device node it makes in a volume must not be
// one on the host, and Docker's bind mounts take their flags from the
// mount they bind. A server that may not mount (not root) returns
// errNoMount.
func bindNoSuid(dir string) error {
	if on, err := IsMountPoint(dir); err != nil || on {
		return err
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		if errors.Is(err, unix.EPERM) {
			return errNoMount
		}
		return fmt.Errorf("bind volume %s: %w", filepath.Base(dir), err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		unix.Unmount(dir, unix.MNT_DETACH)
		return fmt.Errorf("bind volume %s: %w", filepath.Base(dir), err)
	}
	// A remount sets every flag anew: keep those the bind inherited.
	keep := uintptr(fs.Flags) & (unix.MS_RDONLY | unix.MS_NOEXEC | unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME)
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOSUID|unix.MS_NODEV|keep, ""); err != nil {
		unix.Unmount(dir, unix.MNT_DETACH)
		return fmt.Errorf("remount volume %s nosuid,nodev: %w", filepath.Base(dir), err)
	}
	return nil
}

// errNoMount is bindNoSuid's answer on a server that may not mount.
var errNoMount = errors.New("not allowed to mount")

// Usage is a volume's disk use.
type Usage struct {
	UsedBytes int64
	// LimitBytes is its size limit; 0 = none.
	LimitBytes int64
}

// statUsage is what a volume's filesystem holds (statfs: its blocks in
// use, the files' and directories' own, not ext4's overhead).
func statUsage(dir string) (int64, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return 0, fmt.Errorf("volume usage: %w", err)
	}
	return int64(fs.Blocks-fs.Bfree) * int64(fs.Bsize), nil
}

func run(name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(out.String()))
	}
	return nil
}
