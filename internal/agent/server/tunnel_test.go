package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func TestTunnelRefusals(t *testing.T) {
	upgrade := func(secret string) map[string]string {
		return map[string]string{"Connection": "Upgrade", "Upgrade": "warren-tunnel", "X-Warren-Agent-Secret": secret}
	}
	port := closedPort(t)
	tests := []struct {
		name     string
		secret   string // the agent's
		query    string
		header   map[string]string
		wantCode int
		wantMsg  string
	}{
		{"disabled", "", "port=80", upgrade(""), 403, "the tunnel is disabled"},
		{"missing secret", "s3cret", "port=80", map[string]string{"Connection": "Upgrade", "Upgrade": "warren-tunnel"}, 401, "invalid agent secret"},
		{"wrong secret", "s3cret", "port=80", upgrade("s3cres"), 401, "invalid agent secret"},
		{"no upgrade", "s3cret", "port=80", map[string]string{"X-Warren-Agent-Secret": "s3cret"}, 400, "expected an HTTP/1.1 upgrade to warren-tunnel"},
		{"other protocol", "s3cret", "port=80", map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "X-Warren-Agent-Secret": "s3cret"}, 400, "expected an HTTP/1.1 upgrade to warren-tunnel"},
		{"no port", "s3cret", "", upgrade("s3cret"), 400, "invalid port"},
		{"port zero", "s3cret", "port=0", upgrade("s3cret"), 400, "invalid port"},
		{"port too big", "s3cret", "port=65536", upgrade("s3cret"), 400, "invalid port"},
		{"port not a number", "s3cret", "port=http", upgrade("s3cret"), 400, "invalid port"},
		{"closed port", "s3cret", "port=" + strconv.Itoa(port), upgrade("s3cret"), 502, "port " + strconv.Itoa(port) + " is not open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.secret)
			h.st.SetAccessToken("tok") // the secret, not the token, guards the tunnel
			resp, body := h.do("GET", "/_warren/tunnel?"+tt.query, "", tt.header)
			got := []string{strconv.Itoa(resp.StatusCode), body, resp.Header.Get("Content-Type")}
			want := []string{strconv.Itoa(tt.wantCode), `{"code":` + strconv.Itoa(tt.wantCode) + `,"message":"` + tt.wantMsg + `"}` + "\n", "application/json; charset=utf-8"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTunnelRaw speaks the upgrade by hand, sending target bytes in the
// same packet as the request, and checks that Close cuts the tunnel.
func TestTunnelRaw(t *testing.T) {
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	go func() {
		c, err := target.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		io.WriteString(c, strings.ToUpper(line))
		io.Copy(io.Discard, c)
	}()

	h := newHarness(t, "s3cret")
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	port := target.Addr().(*net.TCPAddr).Port
	io.WriteString(conn, "GET /_warren/tunnel?port="+strconv.Itoa(port)+" HTTP/1.1\r\nHost: agent\r\n"+
		"Connection: Upgrade\r\nUpgrade: warren-tunnel\r\nX-Warren-Agent-Secret: s3cret\r\n\r\nhello tunnel\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "warren-tunnel" {
		t.Fatalf("upgrade answered %d %v", resp.StatusCode, resp.Header)
	}
	line, err := br.ReadString('\n')
	if err != nil || line != "HELLO TUNNEL\n" {
		t.Fatalf("through the tunnel: %q, %v", line, err)
	}

	closed := make(chan error, 1)
	go func() { closed <- h.srv.Close() }()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := br.Read(make([]byte, 1)); err == nil {
		t.Errorf("read %d bytes after Close, want the tunnel cut", n)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
}
