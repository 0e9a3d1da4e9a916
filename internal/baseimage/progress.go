package baseimage

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"
)

// progress prints step lines with the time since the build started, and the output of the
// commands the build runs, line by line with a prefix, so a build that takes minutes shows
// where it is.
type progress struct {
	mu    sync.Mutex // guards writes to w
	w     io.Writer
	start time.Time
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, start: time.Now()}
}

func (p *progress) step(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "==> [%6.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

// prefixed returns a writer for a command's output; call Flush when the command has ended.
func (p *progress) prefixed(prefix string) *lineWriter {
	return &lineWriter{p: p, prefix: "    " + prefix + ": "}
}

// lineWriter writes complete lines with a prefix and holds back a partial last line.
type lineWriter struct {
	p      *progress
	prefix string
	buf    []byte
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}

// Flush writes what remains of an unterminated last line.
func (l *lineWriter) Flush() {
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = nil
	}
}

func (l *lineWriter) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	fmt.Fprintf(l.p.w, "%s%s\n", l.prefix, line)
}
