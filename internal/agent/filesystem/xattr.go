package filesystem

import (
	"errors"
	"fmt"
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

// WriteMetadata makes md the whole metadata of path: keys not in md are
// removed, so an upload replaces what an earlier one stored.
func WriteMetadata(path string, md map[string]string) error {
	old, err := xattrNames(path, MetadataPrefix)
	if err != nil {
		if errors.Is(err, ErrMetadataUnsupported) && len(md) == 0 {
			return nil
		}
		return err
	}
	for _, name := range old {
		if _, keep := md[strings.TrimPrefix(name, MetadataPrefix)]; keep {
			continue
		}
		if err := unix.Removexattr(path, name); err != nil && !errors.Is(err, unix.ENODATA) {
			return fmt.Errorf("remove xattr %s of %s: %w", name, path, classifyXattr(err))
		}
	}
	for k, v := range md {
		if err := unix.Setxattr(path, MetadataPrefix+k, []byte(v), 0); err != nil {
			return fmt.Errorf("set xattr %s%s of %s: %w", MetadataPrefix, k, path, classifyXattr(err))
		}
	}
	return nil
}

// xattrNames lists the xattr names of path that start with prefix.
func xattrNames(path, prefix string) ([]string, error) {
	buf := make([]byte, 1024)
	for {
		n, err := unix.Listxattr(path, buf)
		if errors.Is(err, unix.ERANGE) {
			size, err := unix.Listxattr(path, nil)
			if err != nil {
				return nil, fmt.Errorf("list xattrs of %s: %w", path, classifyXattr(err))
			}
			buf = make([]byte, size+1024)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list xattrs of %s: %w", path, classifyXattr(err))
		}
		var names []string
		for name := range strings.SplitSeq(string(buf[:n]), "\x00") {
			if strings.HasPrefix(name, prefix) {
				names = append(names, name)
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
