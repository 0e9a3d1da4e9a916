package nodeagent

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServesItsNodesVolumesWithTheToken(t *testing.T) {
	srv := newTestServer(t)
	dir := t.TempDir()
	write(t, dir, "pvc-1/hello.txt", "hi")
	write(t, dir, "secret", "outside any volume")
	if err := os.Symlink("../secret", filepath.Join(dir, "pvc-1", "out")); err != nil {
		t.Fatal(err)
	}
	srv.ServeVolumes(dir)
	ts := tlsServer(t, srv)
	defer ts.Close()
	addr := strings.TrimPrefix(ts.URL, "https://")
	c := NewClient(token)

	for _, tc := range []struct {
		name, method, path, query, body string
		want                            int
		wantBody                        string
	}{
		{"read", "GET", "pvc-1/file", "path=/hello.txt", "", 200, "hi"},
		{"write", "PUT", "pvc-1/file", "path=/new.txt", "new", 201, ""},
		{"read back", "GET", "pvc-1/file", "path=/new.txt", "", 200, "new"},
		{"dot-dot stays inside", "GET", "pvc-1/file", "path=/../secret", "", 404, ""},
		{"a symlink out is refused", "GET", "pvc-1/file", "path=/out", "", 400, ""},
		{"another volume's name", "GET", "pvc-2/file", "path=/hello.txt", "", 404, ""},
		{"not a name", "GET", "../file", "path=/secret", "", 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			res, err := c.Forward(t.Context(), addr, tc.method, VolumesPrefix+tc.path, tc.query, nil, body)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.want || (tc.wantBody != "" && string(b) != tc.wantBody) {
				t.Errorf("%d %q, want %d %q", res.StatusCode, b, tc.want, tc.wantBody)
			}
		})
	}
	if n, err := c.VolumeUsage(t.Context(), addr, VolumesPrefix, "pvc-1"); err != nil || n != int64(len("hi")+len("new")) {
		t.Errorf("usage %d, %v", n, err)
	}
	req, _ := http.NewRequest(http.MethodGet, ts.URL+VolumesPrefix+"pvc-1/file?path=/hello.txt", nil)
	req.Header.Set("Authorization", "Bearer "+strings.Repeat("x", 32))
	res, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d", res.StatusCode)
	}
}

// The shared volumes are served from their own directory at their own
// prefix: a name is looked up there only, never under the node's
// local-path volumes.
func TestServesSharedVolumesFromTheirDirectory(t *testing.T) {
	srv := newTestServer(t)
	local, shared := t.TempDir(), t.TempDir()
	write(t, local, "pvc-1/where.txt", "local")
	write(t, shared, "pvc-2/where.txt", "shared")
	srv.ServeVolumes(local)
	srv.ServeSharedVolumes(shared)
	ts := tlsServer(t, srv)
	defer ts.Close()
	addr := strings.TrimPrefix(ts.URL, "https://")
	c := NewClient(token)
	for _, tc := range []struct {
		prefix, name string
		want         int
		body         string
	}{
		{SharedVolumesPrefix, "pvc-2", 200, "shared"},
		{SharedVolumesPrefix, "pvc-1", 404, ""},
		{VolumesPrefix, "pvc-2", 404, ""},
	} {
		res, err := c.Forward(t.Context(), addr, "GET", tc.prefix+tc.name+"/file", "path=/where.txt", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.want || (tc.body != "" && string(b) != tc.body) {
			t.Errorf("%s%s: %d %q, want %d %q", tc.prefix, tc.name, res.StatusCode, b, tc.want, tc.body)
		}
	}
	if n, err := c.VolumeUsage(t.Context(), addr, SharedVolumesPrefix, "pvc-2"); err != nil || n != int64(len("shared")) {
		t.Errorf("usage %d, %v", n, err)
	}
}
