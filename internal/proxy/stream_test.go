package proxy

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// streamer writes "first", then waits for release (or the request to
// end), then writes "second".
func streamer(release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "second\n")
	})
}

// readLine reads one line or fails the test after a few seconds.
func readLine(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	type result struct {
		s   string
		err error
	}
	ch := make(chan result, 1)
	go func() { s, err := br.ReadString('\n'); ch <- result{s, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("reading: %v", r.err)
		}
		return r.s
	case <-time.After(5 * time.Second):
		t.Fatal("no data within 5s: the proxy buffers the stream")
		return ""
	}
}

func TestStreamingIsNotBuffered(t *testing.T) {
	for _, port := range []int{49983, 8080} {
		t.Run(fmt.Sprint(port), func(t *testing.T) {
			release := make(chan struct{})
			env := newTestEnv(t, streamer(release), nil)
			env.agent.listen(t, 8080, streamer(release))
			resp, err := http.DefaultTransport.RoundTrip(env.request(t, "GET", env.host(port), "/stream", nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if got := readLine(t, br); got != "first\n" {
				t.Fatalf("got %q", got)
			}
			close(release)
			if got := readLine(t, br); got != "second\n" {
				t.Fatalf("got %q", got)
			}
		})
	}
}

func TestDisconnectCutsStreams(t *testing.T) {
	for _, port := range []int{49983, 8080} {
		t.Run(fmt.Sprint(port), func(t *testing.T) {
			env := newTestEnv(t, streamer(make(chan struct{})), nil)
			env.agent.listen(t, 8080, streamer(make(chan struct{})))
			resp, err := http.DefaultTransport.RoundTrip(env.request(t, "GET", env.host(port), "/stream", nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			readLine(t, br)

			env.streams.Disconnect(env.id)
			done := make(chan error, 1)
			go func() { _, err := io.ReadAll(br); done <- err }()
			select {
			case err := <-done:
				// A clean end would be a nil error; a cut stream is a
				// truncated chunked body.
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("stream ended with %v, want an abrupt end (unexpected EOF)", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the stream stayed open after Disconnect")
			}
		})
	}
}

// upgrader answers an Upgrade request with 101 and then echoes bytes
// upper-cased, like a minimal WebSocket server would echo frames.
func upgrader() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		for {
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			io.WriteString(conn, strings.ToUpper(line))
		}
	})
}

// dialUpgrade sends an upgrade request for host through the proxy and
// returns the raw connection after the 101.
func dialUpgrade(t *testing.T, env *testEnv, host string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", env.front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", host)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d, want 101", resp.StatusCode)
	}
	return conn, br
}

func TestWebSocketThroughTunnel(t *testing.T) {
	env := newTestEnv(t, echo("agent"), nil)
	env.agent.listen(t, 3000, upgrader())
	conn, br := dialUpgrade(t, env, env.host(3000))
	for _, msg := range []string{"hello\n", "hot reload\n"} {
		io.WriteString(conn, msg)
		if got := readLine(t, br); got != strings.ToUpper(msg) {
			t.Errorf("echo %q, want %q", got, strings.ToUpper(msg))
		}
	}

	env.streams.Disconnect(env.id)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err == nil || errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("upgraded connection still open after Disconnect: %v", err)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("upgraded connection still open after Disconnect")
	}
}

// TestBigBodiesStream checks that request and response bodies flow through
// the proxy as they are produced: the upload's first megabyte must reach
// the server before the client has produced the rest.
func TestBigBodiesStream(t *testing.T) {
	const size = 64 << 20
	firstMB := make(chan struct{})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/upload":
			if _, err := io.ReadFull(r.Body, make([]byte, 1<<20)); err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			close(firstMB)
			h := sha256.New()
			n, _ := io.Copy(h, r.Body)
			fmt.Fprintf(w, "%d %x", n+1<<20, h.Sum(nil))
		case "/download":
			io.Copy(w, io.LimitReader(zeros{}, size))
		}
	})
	env := newTestEnv(t, app, nil)
	env.agent.listen(t, 8080, app)

	for _, port := range []int{49983, 8080} {
		t.Run(fmt.Sprint("upload/", port), func(t *testing.T) {
			firstMB = make(chan struct{})
			pr, pw := io.Pipe()
			go func() {
				pw.Write(make([]byte, 1<<20))
				select {
				case <-firstMB:
				case <-time.After(5 * time.Second):
					pw.CloseWithError(errors.New("the first megabyte never reached the server: the proxy buffers uploads"))
					return
				}
				io.Copy(pw, io.LimitReader(zeros{}, size-1<<20))
				pw.Close()
			}()
			_, body := do(t, env.request(t, "POST", env.host(port), "/upload", pr))
			rest := sha256.Sum256(make([]byte, size-1<<20))
			if want := fmt.Sprintf("%d %x", size, rest); body != want {
				t.Errorf("server got %q, want %q", body, want)
			}
		})
		t.Run(fmt.Sprint("download/", port), func(t *testing.T) {
			resp, err := http.DefaultTransport.RoundTrip(env.request(t, "GET", env.host(port), "/download", nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			n, err := io.Copy(io.Discard, resp.Body)
			if err != nil || n != size {
				t.Errorf("downloaded %d bytes, %v; want %d", n, err, size)
			}
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
