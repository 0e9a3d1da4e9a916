package filesystem

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// MetadataPrefix is the xattr namespace that holds the user metadata the
// SDK attaches to files; the key after the prefix is the metadata key.
const MetadataPrefix = "user.e2b."

// ErrMetadataUnsupported reports a filesystem without user xattrs (tmpfs on
// old kernels, some overlay and network mounts). Callers treat metadata as
// best effort and only warn.
var ErrMetadataUnsupported = errors.New("filesystem does not support extended attributes")

// ReadMetadata returns the metadata stored on path (following symlinks),
// keyed without the prefix. A filesystem without xattrs has no metadata.
func ReadMetadata(path string) (map[string]string, error) {
	names, err := xattrNames(path, MetadataPrefix)
	if err != nil {
		if errors.Is(err, ErrMetadataUnsupported) {
			return nil, nil
		}
		return nil, err
	}
	if len(names) == 0 {
		return nil, nil
	}
	md := make(map[string]string, len(names))
	for _, name := range names {
		val, err := getxattr(path, name)
		if errors.Is(err, unix.ENODATA) {
			continue // removed since we listed it
		}
		if err != nil {
			return nil, fmt.Errorf("read xattr %s of %s: %w", name, path, classifyXattr(err))
		}
		md[strings.TrimPrefix(name, MetadataPrefix)] = val
	}
	return md, nil
}

// WriteMetadataFile makes md the whole metadata of the open file f: keys
// not in md are removed, so an upload replaces what an earlier one stored.
// It works on the descriptor, so it reaches the file that was opened even
// if its path has been replaced since.
func WriteMetadataFile(f *os.File, md map[string]string) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) { opErr = writeMetadataFd(int(fd), f.Name(), md) }); err != nil {
		return err
	}
	return opErr
}

func writeMetadataFd(fd int, name string, md map[string]string) error {
	old, err := fdXattrNames(fd, name, MetadataPrefix)
	if err != nil {
		if errors.Is(err, ErrMetadataUnsupported) && len(md) == 0 {
			return nil
		}
		return err
	}
	for _, x := range old {
		if _, keep := md[strings.TrimPrefix(x, MetadataPrefix)]; keep {
			continue
		}
		if err := unix.Fremovexattr(fd, x); err != nil && !errors.Is(err, unix.ENODATA) {
			return fmt.Errorf("remove xattr %s of %s: %w", x, name, classifyXattr(err))
		}
	}
	for k, v := range md {
		if err := unix.Fsetxattr(fd, MetadataPrefix+k, []byte(v), 0); err != nil {
			return fmt.Errorf("set xattr %s%s of %s: %w", MetadataPrefix, k, name, classifyXattr(err))
		}
	}
	return nil
}

// fdXattrNames lists the xattr names of the open file fd (called name in
// errors) that start with prefix.
func fdXattrNames(fd int, name, prefix string) ([]string, error) {
	return listXattrs(name, prefix, func(buf []byte) (int, error) { return unix.Flistxattr(fd, buf) })
}

// xattrNames lists the xattr names of path that start with prefix.
func xattrNames(path, prefix string) ([]string, error) {
	return listXattrs(path, prefix, func(buf []byte) (int, error) { return unix.Listxattr(path, buf) })
}

// listXattrs calls list, which fills buf with a file's xattr names (or, with
// buf nil, says how large they are), and keeps the names that start with
// prefix.
func listXattrs(name, prefix string, list func(buf []byte) (int, error)) ([]string, error) {
	buf := make([]byte, 1024)
	for {
		n, err := list(buf)
		if errors.Is(err, unix.ERANGE) {
			size, err := list(nil)
			if err != nil {
				return nil, fmt.Errorf("list xattrs of %s: %w", name, classifyXattr(err))
			}
			buf = make([]byte, size+1024)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list xattrs of %s: %w", name, classifyXattr(err))
		}
		var names []string
		for x := range strings.SplitSeq(string(buf[:n]), "\x00") {
			if strings.HasPrefix(x, prefix) {
				names = append(names, x)
			}
		}
		return names, nil
	}
}

func getxattr(path, name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Getxattr(path, name, buf)
		if errors.Is(err, unix.ERANGE) {
			size, err := unix.Getxattr(path, name, nil)
			if err != nil {
				return "", err
			}
			buf = make([]byte, size+256)
			continue
		}
		if err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
}

// classifyXattr folds the errnos meaning "no xattrs here" into
// ErrMetadataUnsupported, keeping the errno in the chain.
func classifyXattr(err error) error {
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%w: %w", ErrMetadataUnsupported, err)
	}
	return err
}
