package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/httpguard"
)

// Limits on clients' connections, on a server built as warren serve builds
// its ports (newHTTPServer), with short limits so the tests run quickly.

const (
	testIdle        = 300 * time.Millisecond
	testBodyTimeout = 300 * time.Millisecond
	testBodyMin     = 4096
)

// guardedServer serves h on 127.0.0.1:0 as newHTTPServer does, with the
// test limits and a cap of maxConns per client; it returns the address.
func guardedServer(t *testing.T, maxConns int, h http.Handler) string {
	t.Helper()
	cfg := Config{IdleTimeout: testIdle, Conns: httpguard.Config{
		MaxConnsPerClient: maxConns, BodyTimeout: testBodyTimeout, BodyMinBytes: testBodyMin, OverCapGrace: 500 * time.Millisecond,
	}}
	guard := httpguard.New(cfg.Conns)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(cfg, guard, h, slog.New(slog.DiscardHandler))
	go srv.Serve(guard.Listen(ln))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// rawConn is a client connection driven by hand.
type rawConn struct {
	t *testing.T
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, Conn: c, r: bufio.NewReader(c)}
}

// roundTrip sends a request and reads its response's status and body.
func (c *rawConn) roundTrip(req string) (int, string) {
	c.t.Helper()
	if _, err := io.WriteString(c, req); err != nil {
		c.t.Fatal(err)
	}
	return c.response()
}

func (c *rawConn) response() (int, string) {
	c.t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.t.Fatalf("reading the response: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// closedWithin reports whether the server closes the connection within d,
// and when.
func (c *rawConn) closedWithin(d time.Duration) (bool, time.Duration) {
	start := time.Now()
	c.SetReadDeadline(start.Add(d))
	_, err := c.r.ReadByte()
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded), time.Since(start)
}

const getHealth = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"

// echo answers with how many body bytes it read, or 400 when it could not
// read them, as the API does (the guard's 408 wins for a cut body).
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		w.Header().Set("Content-Length", "12")
		http.Error(w, "cannot read", http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, "read %d", n)
})

// Each HTTP/1 response says how long the server keeps the idle
// connection; none says it when idle connections are never closed.
func TestResponsesHintTheIdleTimeout(t *testing.T) {
	for _, tc := range []struct {
		idle time.Duration
		want string
	}{{testIdle, "timeout=0"}, {90 * time.Second, "timeout=90"}, {-1, ""}} {
		srv := httptest.NewServer(newHTTPServer(Config{IdleTimeout: tc.idle}, httpguard.New(httpguard.Config{}), echo, slog.New(slog.DiscardHandler)).Handler)
		res, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		srv.Close()
		if got := res.Header.Get("Keep-Alive"); got != tc.want {
			t.Errorf("idle timeout %v: Keep-Alive %q, want %q", tc.idle, got, tc.want)
		}
	}
}

func TestIdleKeepAliveConnectionClosed(t *testing.T) {
	c := dialRaw(t, guardedServer(t, 0, echo))
	if code, _ := c.roundTrip(getHealth); code != 200 {
		t.Fatalf("status %d", code)
	}
	if closed, after := c.closedWithin(5 * time.Second); !closed || after > testIdle+time.Second {
		t.Errorf("idle keep-alive connection closed=%v after %v, want closed after about %v", closed, after, testIdle)
	}
}

func TestSlowBodyCut(t *testing.T) {
	c := dialRaw(t, guardedServer(t, 0, echo))
	io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() { // 1 byte every 50 ms: 6 in a body timeout, far below 4096
		for range 1000 {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := c.Write([]byte{'x'}); err != nil {
				return
			}
		}
	}()
	code, body := c.response()
	var e struct {
		Code    int
		Message string
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != 408 || e.Code != 408 || !strings.Contains(e.Message, "too slowly") {
		t.Errorf("slow body: %d %s, want 408 in E2B's shape", code, body)
	}
	if took := time.Since(start); took > testBodyTimeout+time.Second {
		t.Errorf("cut after %v, want about %v", took, testBodyTimeout)
	}
	if closed, _ := c.closedWithin(2 * time.Second); !closed {
		t.Error("connection of a cut body left open")
	}
}

// TestRealPacedUploadPasses: an upload far longer than the body timeout
// passes when each 4 KiB of it comes in time, as does one that a handler
// slow to read takes in slowly.
func TestRealPacedUploadPasses(t *testing.T) {
	const chunks = 40 // 160 KiB over 40 × 40 ms = 1.6 s, 5 body timeouts
	t.Run("client at a real pace", func(t *testing.T) {
		c := dialRaw(t, guardedServer(t, 0, echo))
		fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", chunks*testBodyMin)
		start := time.Now()
		for range chunks {
			time.Sleep(40 * time.Millisecond)
			if _, err := c.Write(bytes.Repeat([]byte{'x'}, testBodyMin)); err != nil {
				t.Fatalf("cut after %v: %v", time.Since(start), err)
			}
		}
		if code, body := c.response(); code != 200 || body != fmt.Sprint("read ", chunks*testBodyMin) {
			t.Errorf("paced upload: %d %s", code, body)
		}
	})
	t.Run("server slow to read", func(t *testing.T) {
		slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			buf := make([]byte, testBodyMin)
			n := 0
			for {
				time.Sleep(2 * testBodyTimeout)
				m, err := io.ReadFull(r.Body, buf)
				n += m
				if err != nil {
					break
				}
			}
			fmt.Fprintf(w, "read %d", n)
		})
		c := dialRaw(t, guardedServer(t, 0, slow))
		fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", 3*testBodyMin, bytes.Repeat([]byte{'x'}, 3*testBodyMin))
		if code, body := c.response(); code != 200 || body != fmt.Sprint("read ", 3*testBodyMin) {
			t.Errorf("upload read slowly: %d %s", code, body)
		}
	})
}

// TestSilentStreamNotCut: a response stream silent for longer than every
// timeout (a background command's output), after a request with a body,
// is not cut, nor is an upgraded connection's silence.
func TestSilentStreamNotCut(t *testing.T) {
	silence := 3 * max(testIdle, testBodyTimeout)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
			brw.Flush()
			line, _ := brw.ReadString('\n')
			io.WriteString(conn, "echo "+line)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(200)
		io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
		select {
		case <-time.After(silence):
			io.WriteString(w, "late\n")
		case <-r.Context().Done():
		}
	})
	addr := guardedServer(t, 0, h)

	res, err := http.Post("http://"+addr+"/stream", "application/json", strings.NewReader(`{"cmd":"sleep"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || string(b) != "first\nlate\n" {
		t.Errorf("silent stream: %q %v, want its late output", b, err)
	}

	c := dialRaw(t, addr)
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
	res, err = http.ReadResponse(c.r, nil)
	if err != nil || res.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	time.Sleep(silence)
	io.WriteString(c, "hi\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := c.r.ReadString('\n'); line != "echo hi\n" {
		t.Errorf("upgraded connection after silence: %q %v", line, err)
	}
}

// TestConnectionsPerClientCapped: the connection past the cap is answered
// 429 in E2B's shape and closed, one that says nothing is closed soon, and
// a slot freed serves again.
func TestConnectionsPerClientCapped(t *testing.T) {
	const capped = 3
	addr := guardedServer(t, capped, echo)
	var open []*rawConn
	for range capped {
		c := dialRaw(t, addr)
		if code, _ := c.roundTrip(getHealth); code != 200 {
			t.Fatalf("connection under the cap: %d", code)
		}
		open = append(open, c)
	}
	over := dialRaw(t, addr)
	code, body := over.roundTrip(getHealth)
	if code != 429 || !strings.Contains(body, `"code":429`) || !strings.Contains(body, "at most 3") {
		t.Errorf("connection over the cap: %d %s, want 429", code, body)
	}
	if closed, _ := over.closedWithin(2 * time.Second); !closed {
		t.Error("connection over the cap left open")
	}
	silent := dialRaw(t, addr)
	if closed, after := silent.closedWithin(3 * time.Second); !closed || after > time.Second {
		t.Errorf("silent connection over the cap: closed=%v after %v, want within its grace", closed, after)
	}
	open[0].Close()
	time.Sleep(50 * time.Millisecond) // the server sees the close
	again := dialRaw(t, addr)
	if code, _ := again.roundTrip(getHealth); code != 200 {
		t.Errorf("connection after one closed: %d, want 200", code)
	}
}

// TestServerConnectionLimits: the Config's limits reach the Server's
// HTTP port.
func TestServerConnectionLimits(t *testing.T) {
	srv := openTest(t, func(c *Config) { c.IdleTimeout, c.Conns.MaxConnsPerClient = testIdle, 2 })
	addr := strings.TrimPrefix(srv.URL(), "http://")
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	for _, c := range []*rawConn{a, b} {
		if code, _ := c.roundTrip(getHealth); code != 204 {
			t.Fatalf("health: %d", code)
		}
	}
	if code, _ := dialRaw(t, addr).roundTrip(getHealth); code != 429 {
		t.Errorf("third connection: %d, want 429", code)
	}
	if closed, after := a.closedWithin(5 * time.Second); !closed || after > testIdle+time.Second {
		t.Errorf("idle connection closed=%v after %v", closed, after)
	}
}

// TestHTTPSGuarded: the HTTPS port, HTTP/2 included, has the same
// limits: a slow body is cut, a silent stream is not.
func TestHTTPSGuarded(t *testing.T) {
	cfg := Config{TLSAddr: "127.0.0.1:0", Domain: "warren.test", StateDir: t.TempDir(), IdleTimeout: testIdle,
		Conns: httpguard.Config{BodyTimeout: testBodyTimeout, BodyMinBytes: testBodyMin}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			return
		}
		w.WriteHeader(200)
		http.NewResponseController(w).Flush()
		time.Sleep(3 * testIdle)
		fmt.Fprintf(w, "%s read %d", r.Proto, n)
	})
	l, err := listenSDK(t.Context(), cfg, httpguard.New(cfg.Conns), h, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	hc := &http.Client{Transport: &http.Transport{
		ForceAttemptHTTP2: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", l.tlsAddr)
		},
	}}
	res, err := hc.Post("https://8000-abc.warren.test/", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "HTTP/2.0 read 5" {
		t.Errorf("silent stream over HTTP/2: %d %q", res.StatusCode, b)
	}

	pr, pw := io.Pipe()
	go func() {
		for range 100 {
			time.Sleep(50 * time.Millisecond)
			if _, err := pw.Write([]byte{'x'}); err != nil {
				return
			}
		}
		pw.Close()
	}()
	defer pw.Close()
	res, err = hc.Post("https://8000-abc.warren.test/", "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 408 {
		t.Errorf("slow body over HTTP/2: %d %s, want 408", res.StatusCode, b)
	}
}
