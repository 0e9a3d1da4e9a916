package files

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/warrentest"
)

func TestDownload(t *testing.T) {
	f := newFixture(t)
	file := filepath.Join(f.dir, "notes.txt")
	content := strings.Repeat("hello world\n", 1000)
	warrentest.WriteFile(t, file, content)
	empty := filepath.Join(f.dir, "empty.bin")
	warrentest.WriteFile(t, empty, "")

	t.Run("identity", func(t *testing.T) {
		r := do(t, newRequest(t, http.MethodGet, f.fileURL("path", file), nil))
		want := map[string]string{
			"Content-Disposition": `inline; filename="notes.txt"`,
			"Vary":                "Accept-Encoding",
			"Content-Encoding":    "",
			"Content-Length":      "12000",
		}
		got := map[string]string{}
		for k := range want {
			got[k] = r.header.Get(k)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("headers (-want +got):\n%s", diff)
		}
		if r.status != 200 || r.body != content {
			t.Errorf("got %d with %d bytes", r.status, len(r.body))
		}
	})
	t.Run("gzip", func(t *testing.T) {
		r := do(t, newRequest(t, http.MethodGet, f.fileURL("path", file), nil, "Accept-Encoding", "gzip"))
		if r.status != 200 || r.header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("status %d, headers %v", r.status, r.header)
		}
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("Content-Type = %q, want text/plain", ct)
		}
		zr, err := gzip.NewReader(strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil || string(plain) != content {
			t.Errorf("decompressed %d bytes (%v), want the file", len(plain), err)
		}
	})
	t.Run("range forces identity", func(t *testing.T) {
		r := do(t, newRequest(t, http.MethodGet, f.fileURL("path", file), nil, "Accept-Encoding", "gzip", "Range", "bytes=6-10"))
		if r.status != http.StatusPartialContent || r.body != "world" || r.header.Get("Content-Encoding") != "" {
			t.Errorf("got %d %q encoding %q, want 206 \"world\" unencoded", r.status, r.body, r.header.Get("Content-Encoding"))
		}
	})
	t.Run("empty file", func(t *testing.T) {
		r := do(t, newRequest(t, http.MethodGet, f.fileURL("path", empty), nil))
		if r.status != 200 || r.body != "" || r.header.Get("Content-Length") != "0" {
			t.Errorf("got %d %q Content-Length %q", r.status, r.body, r.header.Get("Content-Length"))
		}
	})
	t.Run("not acceptable", func(t *testing.T) {
		r := do(t, newRequest(t, http.MethodGet, f.fileURL("path", file), nil, "Accept-Encoding", "br, *;q=0"))
		wantError(t, r, http.StatusNotAcceptable, "")
	})
	t.Run("missing", func(t *testing.T) {
		missing := filepath.Join(f.dir, "nope")
		wantError(t, do(t, newRequest(t, http.MethodGet, f.fileURL("path", missing), nil)), 404, "path '"+missing+"' does not exist")
	})
	t.Run("directory", func(t *testing.T) {
		wantError(t, do(t, newRequest(t, http.MethodGet, f.fileURL("path", f.dir), nil)), 400, "path '"+f.dir+"' is a directory")
	})
	t.Run("dot-dot resolves normally", func(t *testing.T) {
		r := do(t, newRequest(t, http.MethodGet, f.fileURL("path", f.dir+"/x/../notes.txt"), nil))
		if r.status != 200 || r.body != content {
			t.Errorf("got %d", r.status)
		}
	})
	t.Run("NUL byte", func(t *testing.T) {
		wantError(t, do(t, newRequest(t, http.MethodGet, f.fileURL("path", f.dir+"/a\x00b"), nil)), 400, "")
	})
	t.Run("huge path", func(t *testing.T) {
		r := do(t, newRequest(t, http.MethodGet, f.fileURL("path", "/"+strings.Repeat("a/", 3000)), nil))
		if r.status != 404 && r.status != 400 {
			t.Errorf("status = %d, want 400 or 404", r.status)
		}
	})
}

func TestChooseEncoding(t *testing.T) {
	const small, large = 100, 1 << 20
	tests := []struct {
		accept       string
		identityOnly bool
		size         int64
		want         string // "" means 406
	}{
		{"", false, small, "identity"},
		{"gzip", false, large, "gzip"},
		{"gzip, deflate, br", false, large, "identity"},
		{"gzip, deflate, br", false, small, "gzip"},
		{"gzip, deflate", false, large, "identity"},
		{"gzip, deflate", false, 0, "gzip"},
		{"gzip, deflate;q=0.5", false, large, "gzip"},
		{"deflate, gzip;q=0.5", false, large, "identity"},
		{"gzip, deflate, identity;q=0", false, large, "gzip"},
		{"x-gzip", false, large, "gzip"},
		{"GZIP;q=0.5", false, large, "gzip"},
		{"gzip;q=0.5, identity;q=0.8", false, small, "identity"},
		{"gzip;q=0", false, small, "identity"},
		{"*", false, large, "identity"},
		{"*", false, small, "gzip"},
		{"*;q=0", false, small, ""},
		{"br, *;q=0", false, small, ""},
		{"identity;q=0", false, small, ""},
		{"identity;q=0, *;q=0.1", false, large, "gzip"},
		{"gzip, identity;q=0", false, small, "gzip"},
		{"gzip", true, small, "identity"},
		{"gzip, identity;q=0", true, small, ""},
		{"gzip;q=bogus", false, large, "gzip"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d", tc.accept, tc.size), func(t *testing.T) {
			got, ok := chooseEncoding([]string{tc.accept}, tc.identityOnly, tc.size)
			if !ok {
				got = ""
			}
			if got != tc.want {
				t.Errorf("chooseEncoding(%q, %v, %d) = %q, want %q", tc.accept, tc.identityOnly, tc.size, got, tc.want)
			}
		})
	}
}

func TestContentDisposition(t *testing.T) {
	for name, want := range map[string]string{
		"a.txt":   `inline; filename="a.txt"`,
		`q"uo\te`: `inline; filename="q\"uo\\te"`,
		"naïve":   `inline; filename*=utf-8''na%C3%AFve`,
	} {
		if got := contentDisposition(name); got != want {
			t.Errorf("contentDisposition(%q) = %q, want %q", name, got, want)
		}
	}
}

func gzipped(t testing.TB, s string) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return &b
}
