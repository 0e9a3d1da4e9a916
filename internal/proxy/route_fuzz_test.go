package proxy

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

// FuzzRoute feeds arbitrary Host headers and routing headers to the
// router. Whatever it accepts must be a valid port and sandbox ID, and must
// route the same way when written back in canonical form.
func FuzzRoute(f *testing.F) {
	for _, seed := range []struct{ host, id, port string }{
		{"49983-isbx1.warren.test", "", ""},
		{"8080-abc-client.e2b.app:443", "", ""},
		{"65535-z.x", "", ""},
		{"65536-z.x", "", ""},
		{"0-abc.x", "", ""},
		{"-abc.x", "", ""},
		{"+80-abc.x", "", ""},
		{"80-.x", "", ""},
		{"80-ABC.x.", "", ""},
		{"localhost:3000", "isbx1", "49983"},
		{"[::1]:3000", "isbx1", "8080"},
		{"127.0.0.1", "isbx1-client", "0x50"},
		{"sandbox.warren.test", "isbx1", "49983"},
		{"[fe80::1%eth0]:80", "a", "1"},
		{"", "", ""},
	} {
		f.Add(seed.host, seed.id, seed.port)
	}
	f.Fuzz(func(t *testing.T, host, id, port string) {
		r := &http.Request{Host: host, Header: http.Header{}, URL: &url.URL{Path: "/"}}
		if id != "" {
			r.Header.Set(headerSandboxID, id)
		}
		if port != "" {
			r.Header.Set(headerSandboxPort, port)
		}
		isSandbox := IsSandboxRequest(r, testDomain)
		dst, err := route(r, testDomain)
		if err != nil {
			return
		}
		if !isSandbox {
			t.Errorf("route accepted %q (id %q port %q) but IsSandboxRequest says it is not for the data plane", host, id, port)
		}
		if dst.port < 1 || dst.port > 65535 {
			t.Errorf("host %q: port %d out of range", host, dst.port)
		}
		if got, err := sandbox.ParseID(dst.sandboxID); err != nil || got != dst.sandboxID || strings.Contains(got, "-") {
			t.Errorf("host %q: invalid sandbox ID %q", host, dst.sandboxID)
		}
		canon, ok := parseHost(strconv.Itoa(dst.port) + "-" + dst.sandboxID + "." + testDomain)
		if !ok || canon != dst {
			t.Errorf("host %q: %+v does not round-trip (%+v, %v)", host, dst, canon, ok)
		}
	})
}
