package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"
)

// A draining server answers a call sent on a connection kept idle since
// just before the drain (closing it then would cut such a call), and
// closes each connection after its answer.
func TestDrainClosesAfterTheAnswer(t *testing.T) {
	srv := openTest(t, nil)
	srv.drainIdle = time.Hour // no idle connection closed here
	client := &http.Client{Transport: &http.Transport{}}
	get := func() (reused, closed bool) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL()+"/health", nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		}))
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("a call while draining: %v", err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return reused, res.Close
	}
	if _, closed := get(); closed {
		t.Fatal("the connection closed before the drain")
	}
	srv.Drain()
	if reused, closed := get(); !reused || !closed {
		t.Errorf("after the drain: sent on the kept connection %v (want true), answer closing it %v (want true)", reused, closed)
	}
	if reused, closed := get(); reused || !closed {
		t.Errorf("next: a new connection %v, closed after its answer %v; want both", !reused, closed)
	}
}

// A draining server closes a connection that stays idle, so that its
// client's next call does not go to a server about to end.
func TestDrainClosesIdleConnections(t *testing.T) {
	srv := openTest(t, nil)
	srv.drainIdle = 100 * time.Millisecond
	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL(), "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		r := bufio.NewReader(c)
		if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return c, r
	}
	idle, idleR := dial()
	srv.Drain()
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if n, err := idleR.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("an idle connection while draining: read %d bytes, %v; want it closed", n, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the idle connection was closed %v after the drain", took)
	}
}
