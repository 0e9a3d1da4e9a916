package limitguard

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
)

// files reads the guard's cgroup files into one buffer it keeps. The guard
// checks twice a second for the whole life of the sandbox, idle or not, and
// reading with os.ReadFile made ~10 KiB of garbage a second: most of what
// an idle agent's heap grew by, to the 4 MiB the collector waits for
// (bench/idle). A check now allocates only the paths the kernel is given.
// Not safe for concurrent use: Start reads before the guard's goroutine
// runs, and then only that goroutine reads.
type files struct {
	buf [512]byte // larger than any file read: memory.oom_control is ~60 bytes
}

// read returns the start of path's content, in the buffer: valid until the
// next read.
func (f *files) read(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	n := 0
	for n < len(f.buf) {
		m, err := syscall.Read(fd, f.buf[n:])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return f.buf[:n], nil
}

// readPids reads pids.current and pids.max of dir; max is 0 for "max".
func (f *files) readPids(dir string) (tasks, limit uint64, err error) {
	b, err := f.read(filepath.Join(dir, "pids.current"))
	if err != nil {
		return 0, 0, err
	}
	if tasks, err = parseCount(b); err != nil {
		return 0, 0, err
	}
	b, err = f.read(filepath.Join(dir, "pids.max"))
	if err != nil {
		return 0, 0, err
	}
	limit, _ = parseCount(b) // "max": 0
	return tasks, limit, nil
}

// count reads c.
func (f *files) count(c Counter) (uint64, error) {
	b, err := f.read(c.File)
	if err != nil {
		return 0, err
	}
	if c.Key == "" {
		return parseCount(b)
	}
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimSpace(line)
		if v, ok := bytes.CutPrefix(line, []byte(c.Key)); ok && len(v) > 0 && v[0] == ' ' {
			return parseCount(v[1:])
		}
	}
	return 0, fmt.Errorf("%s has no %s count", c.File, c.Key)
}

// parseCount parses a decimal count, space around it allowed.
func parseCount(b []byte) (uint64, error) {
	return strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
}
