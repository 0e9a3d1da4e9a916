package server

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/httpguard"
)

// A body the handler does not read is still the server's to take:
// net/http reads up to 256 KiB of it before it answers, with no deadline
// of its own, so a client sending one byte now and then held the
// connection (and the answer) for ever. A request refused before its
// body is needed is answered at once with Connection: close, and the
// server's own reading of a body is under the body timeout.

// trickle sends a POST of a 1000-byte body whose first byte only comes.
func trickle(c *rawConn) {
	c.t.Helper()
	if _, err := io.WriteString(c, "POST /sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx"); err != nil {
		c.t.Fatal(err)
	}
}

func readResponse(c *rawConn, within time.Duration) *http.Response {
	c.t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	res, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.t.Fatalf("no response within %v: %v", within, err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

func TestRefusedBeforeBodyAnsweredAtOnce(t *testing.T) {
	refuse := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no key", http.StatusUnauthorized)
	})
	c := dialRaw(t, guardedServer(t, 0, refuse))
	trickle(c)
	res := readResponse(c, 2*time.Second) // far below the body's 1000 s at this pace; the test's limit
	if res.StatusCode != http.StatusUnauthorized || !res.Close {
		t.Errorf("answer %d, Connection: %q; want 401 and close", res.StatusCode, res.Header.Get("Connection"))
	}
	if closed, _ := c.closedWithin(2 * time.Second); !closed {
		t.Error("the connection of a refused request stays open for its body")
	}
}

// A handler that answers (and flushes) without reading the body makes
// net/http take the body then: it gets the body timeout, no more.
func TestUnreadBodyUnderBodyTimeout(t *testing.T) {
	answer := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		http.NewResponseController(w).Flush()
		io.WriteString(w, "done")
	})
	c := dialRaw(t, guardedServer(t, 0, answer))
	trickle(c)
	res := readResponse(c, testBodyTimeout+2*time.Second)
	if res.StatusCode != http.StatusAccepted || !res.Close {
		t.Errorf("answer %d, Connection: %q; want 202 and close", res.StatusCode, res.Header.Get("Connection"))
	}
	if closed, _ := c.closedWithin(2 * time.Second); !closed {
		t.Error("the connection stays open for the unread body")
	}
}

// A body that came whole is no reason to close: the connection serves
// the next request.
func TestUnreadWholeBodyKeepsConnection(t *testing.T) {
	refuse := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no key", http.StatusUnauthorized)
	})
	c := dialRaw(t, guardedServer(t, 0, refuse))
	for i := range 2 {
		if code, _ := c.roundTrip("POST /sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); code != http.StatusUnauthorized {
			t.Fatalf("request %d: %d", i, code)
		}
	}
}

// A handler that took part of a body and stopped (a write that hit a
// size limit) answers while the client still sends the rest: the rest
// gets the body timeout, not the short grace of a body never read, so
// the client reads the answer and the connection serves the next
// request, instead of being closed with bytes unread (a reset that can
// lose the answer).
func TestPartlyReadBodyTakenUnderBodyTimeout(t *testing.T) {
	c := dialRaw(t, stopsAfterTenBytes(t))
	if _, err := io.WriteString(c, "POST /v HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"+strings.Repeat("x", 10)); err != nil {
		t.Fatal(err)
	}
	// The rest comes later than a body never read would be waited for
	// (the client's pace, not a wait for the server).
	time.Sleep(time.Second)
	if _, err := io.WriteString(c, strings.Repeat("x", 990)); err != nil {
		t.Fatal(err)
	}
	if res := readResponse(c, 10*time.Second); res.StatusCode != http.StatusRequestEntityTooLarge || res.Close {
		t.Errorf("answer %d, Connection: %q; want 413, kept", res.StatusCode, res.Header.Get("Connection"))
	}
	if code, _ := c.roundTrip("POST /v HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789"); code != http.StatusRequestEntityTooLarge {
		t.Errorf("the next request on the connection: %d", code)
	}
}

// A write refused after its first bytes with megabytes of its body still
// on the way (a volume's size limit) gets its answer on a kept
// connection: the rest is taken, up to a bound, rather than reset.
func TestPartlyReadLargeBodyStillAnswered(t *testing.T) {
	c := dialRaw(t, stopsAfterTenBytes(t))
	const size = 4 << 20
	sent := make(chan error, 1)
	go func() {
		_, err := io.WriteString(c, fmt.Sprintf("POST /v HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size)+strings.Repeat("x", size))
		sent <- err
	}()
	if res := readResponse(c, 10*time.Second); res.StatusCode != http.StatusRequestEntityTooLarge || res.Close {
		t.Errorf("answer %d, Connection: %q; want 413, kept", res.StatusCode, res.Header.Get("Connection"))
	}
	if err := <-sent; err != nil {
		t.Errorf("the body was not all taken: %v", err)
	}
}

// stopsAfterTenBytes serves, under a 10 s body timeout, a handler that
// reads 10 bytes of a body and answers 413 (a write that hit a size
// limit); it returns the server's address.
func stopsAfterTenBytes(t *testing.T) string {
	stop := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadFull(r.Body, make([]byte, 10))
		http.Error(w, "full", http.StatusRequestEntityTooLarge)
	})
	cfg := Config{IdleTimeout: testIdle, Conns: httpguard.Config{BodyTimeout: 10 * time.Second, BodyMinBytes: testBodyMin}}
	guard := httpguard.New(cfg.Conns)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(cfg, guard, stop, slog.New(slog.DiscardHandler))
	go srv.Serve(guard.Listen(ln))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}
