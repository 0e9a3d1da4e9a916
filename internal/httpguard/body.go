package httpguard

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ErrSlowBody is the error a request body's reads return once it is cut
// for arriving slower than the minimum pace.
var ErrSlowBody = errors.New("request body arrived too slowly")

// servePaced serves r with its body paced. Once the body is cut, the
// guard answers 408 in the handler's stead, unless it had answered
// already (a response streaming while the body comes).
func (g *Guard) servePaced(h http.Handler, w http.ResponseWriter, r *http.Request) {
	b := &pacedBody{body: r.Body, rc: http.NewResponseController(w), timeout: g.cfg.BodyTimeout, minBytes: g.cfg.BodyMinBytes}
	r.Body = b
	tw := &trackingWriter{ResponseWriter: w, body: b}
	// net/http reads what a handler leaves of a body (up to 256 KiB)
	// before it sends the answer, with no deadline of its own: until the
	// handler reads, the body timeout bounds that too. An upgrade is
	// left alone: its connection outlives the request, deadline and all.
	if r.Header.Get("Upgrade") == "" {
		_ = b.rc.SetReadDeadline(time.Now().Add(g.cfg.BodyTimeout))
	}
	h.ServeHTTP(tw, r)
	cut := b.finish()
	if !cut {
		if b.dropRest(tw) {
			g.log.InfoContext(r.Context(), "request answered before its body ended; the connection closes after the answer", "remote", r.RemoteAddr, "path", r.URL.Path)
		}
		return
	}
	g.log.InfoContext(r.Context(), "request body too slow; cut", "remote", r.RemoteAddr, "path", r.URL.Path)
	if !tw.wrote.Load() {
		clear(w.Header()) // the handler's, for the answer it did not send
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestTimeout, fmt.Sprintf(
			"The request body arrived too slowly: at least %d bytes are needed every %v", g.cfg.BodyMinBytes, g.cfg.BodyTimeout))
	}
}

// pacedBody counts the time its reads wait for the client, and cuts the
// body when BodyMinBytes of it took longer than BodyTimeout of that time.
// Only waiting counts: a handler slow to read (a proxy whose upstream
// takes the bytes slowly) is not the client's fault. Each read sets the
// connection's read deadline (ResponseController) to what is left of the
// current allowance. The deadline goes once the body ends (net/http's
// HTTP/1 server clears it itself then, as it starts watching for the
// client going away; HTTP/2 streams keep theirs), and is never touched
// once the handler returned, when the connection may already serve the
// next request.
type pacedBody struct {
	body     io.ReadCloser
	rc       *http.ResponseController
	timeout  time.Duration
	minBytes int64

	mu      sync.Mutex // guards the fields below; not held while reading
	started bool
	done    bool          // the body ended or the handler returned: deadlines are the server's
	got     int64         // bytes since the allowance was last renewed
	left    time.Duration // of the allowance
	cut     bool
	ended   bool // the handler read it to its end
}

func (b *pacedBody) Read(p []byte) (int, error) {
	// The wait is counted from the deadline's own base: a deadline that
	// expired then always leaves nothing of the allowance (counted from a
	// later instant, a read preempted between the two could find a few
	// milliseconds left, and pass the timeout to the handler as a broken
	// body instead of cutting it).
	start := time.Now()
	b.mu.Lock()
	paced := !b.done
	if paced {
		if !b.started {
			b.started, b.left = true, b.timeout
		}
		if err := b.rc.SetReadDeadline(start.Add(b.left)); err != nil {
			// Not a net/http server's writer: no deadlines, no pace.
			b.done, paced = true, false
		}
	}
	b.mu.Unlock()
	n, err := b.body.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !paced || b.done {
		if b.cut && err != nil {
			err = ErrSlowBody
		}
		return n, err
	}
	b.got += int64(n)
	b.left -= time.Since(start)
	switch {
	case err != nil:
		b.ended = err == io.EOF
		if errors.Is(err, os.ErrDeadlineExceeded) && b.left <= 0 {
			b.cut = true
			err = fmt.Errorf("%w: %w", ErrSlowBody, err)
		} else {
			_ = b.rc.SetReadDeadline(time.Time{})
		}
		b.done = true
	case b.got >= b.minBytes:
		b.got, b.left = 0, b.timeout
	}
	return n, err
}

func (b *pacedBody) Close() error { return b.body.Close() }

func (b *pacedBody) isCut() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cut
}

// finish hands the deadlines back to the server once the handler
// returned, and reports whether the body was cut.
func (b *pacedBody) finish() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = true
	return b.cut
}

// dropRest deals with what the handler left of the body, once it
// returned: net/http would wait for up to 256 KiB of it before it
// answers or closes, at the client's pace. A body the handler never read
// (a request refused before its body was needed) gets dropGrace; one it
// read part of (a write that stopped at a limit) gets the body timeout,
// as the client is sending the rest as it sent the start, and a
// connection closed with bytes of it unread is reset, which can lose the
// answer. What arrives by then is taken (up to maxUnread of a body never
// read, maxDrain of one read in part); if more is to come, the answer
// says Connection: close (when the handler has not sent its header) and
// the server's own reads of the rest fail at once, so the connection
// closes after the answer; dropRest then reports true.
func (b *pacedBody) dropRest(tw *trackingWriter) (closes bool) {
	b.mu.Lock()
	ended, grace, most := b.ended, dropGrace, int64(maxUnread)
	if b.started {
		grace, most = b.timeout, maxDrain
	}
	b.mu.Unlock()
	if ended {
		return false
	}
	// Not a past deadline: the body's end starts net/http's background
	// read of the connection, which must not fail before the deadline is
	// cleared below.
	if err := b.rc.SetReadDeadline(time.Now().Add(grace)); err != nil {
		return false // no deadlines here (not a net/http connection)
	}
	if _, err := io.CopyN(io.Discard, b.body, most+1); err == io.EOF {
		_ = b.rc.SetReadDeadline(time.Time{})
		return false
	}
	_ = b.rc.SetReadDeadline(time.Now())
	if !tw.wrote.Load() {
		tw.Header().Set("Connection", "close")
	}
	return true
}

// dropGrace is how long dropRest waits for the bytes of a body the
// handler never read that were sent with the request.
const dropGrace = 100 * time.Millisecond

// maxUnread is net/http's maxPostHandlerReadBytes: the most of a body it
// reads for a handler that left it.
const maxUnread = 256 << 10

// maxDrain is the most of a body the handler read part of that dropRest
// takes so that the answer reaches the client on a kept connection: a
// file write refused at a volume's size limit after its first bytes still
// has most of its body on the way (a 1 MiB write left ~1 MiB, past
// maxUnread, and its 413 was lost to the reset in full runs). Past it the
// connection closes, as for a body never read.
const maxDrain = 16 << 20

// trackingWriter notes whether the handler answered, and drops its
// answer once the body was cut before it. ResponseController reaches the
// writer beneath through Unwrap (hijacks, deadlines, full duplex).
type trackingWriter struct {
	http.ResponseWriter
	body  *pacedBody
	wrote atomic.Bool // a final status was sent; set from any goroutine
}

// dropped reports whether the handler's answer is dropped for the guard's.
func (w *trackingWriter) dropped() bool { return !w.wrote.Load() && w.body.isCut() }

func (w *trackingWriter) WriteHeader(code int) {
	if w.dropped() {
		return
	}
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.wrote.Store(true)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *trackingWriter) Write(p []byte) (int, error) {
	if w.dropped() {
		return 0, ErrSlowBody
	}
	w.wrote.Store(true)
	return w.ResponseWriter.Write(p)
}

// FlushError flushes, which sends the status line when nothing was.
func (w *trackingWriter) FlushError() error {
	if w.dropped() {
		return ErrSlowBody
	}
	w.wrote.Store(true)
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
