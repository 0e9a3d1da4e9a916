package volume

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type contentAPI struct {
	srv   *httptest.Server
	s     *Service
	id    string
	token string
}

func newContent(t *testing.T) *contentAPI {
	s := newService(t, nil)
	v, err := s.Create(context.Background(), "team", "c")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &contentAPI{srv: srv, s: s, id: v.ID, token: s.Token(v)}
}

func (c *contentAPI) do(t *testing.T, method, op, p, query string, body io.Reader) (int, string) {
	t.Helper()
	st, b, err := c.try(method, op, p, query, body)
	if err != nil {
		t.Fatal(err)
	}
	return st, b
}

// try is do, with a transport error returned.
func (c *contentAPI) try(method, op, p, query string, body io.Reader) (int, string, error) {
	u := c.srv.URL + "/volumecontent/" + c.id + "/" + op + "?path=" + url.QueryEscape(p) + query
	req, _ := http.NewRequest(method, u, body)
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), nil
}

func TestContentRoundTrip(t *testing.T) {
	c := newContent(t)
	if st, b := c.do(t, "PUT", "file", "/a/b.txt", "", strings.NewReader("hello")); st != 201 || !strings.Contains(b, `"path":"/a/b.txt"`) {
		t.Fatalf("write: %d %s", st, b)
	}
	if fi, err := os.Stat(filepath.Join(c.s.Dir(c.id), "a/b.txt")); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("written file: %v %v, want rw for every uid (sandbox users)", fi.Mode(), err)
	}
	if st, b := c.do(t, "GET", "file", "a/b.txt", "", nil); st != 200 || b != "hello" {
		t.Fatalf("read: %d %q", st, b)
	}
	if st, _ := c.do(t, "PUT", "file", "/a/b.txt", "", strings.NewReader("x")); st != 409 {
		t.Errorf("write over without force: %d, want 409", st)
	}
	if st, _ := c.do(t, "PUT", "file", "/a/b.txt", "&force=true", strings.NewReader("new")); st != 201 {
		t.Errorf("write with force: %d", st)
	}
	st, b := c.do(t, "GET", "dir", "/", "&depth=2", nil)
	var list []EntryStat
	json.Unmarshal([]byte(b), &list)
	if st != 200 || len(list) != 2 || list[0].Path != "/a" || list[1].Path != "/a/b.txt" || list[1].Size != 3 {
		t.Errorf("list depth 2: %d %s", st, b)
	}
	if st, _ := c.do(t, "POST", "dir", "/x/y", "", nil); st != 404 {
		t.Errorf("makeDir without parents: %d, want 404", st)
	}
	if st, b := c.do(t, "POST", "dir", "/x/y", "&force=true&mode=448", nil); st != 201 || !strings.Contains(b, `"mode":448`) {
		t.Errorf("makeDir force: %d %s", st, b)
	}
	if st, b := c.do(t, "PATCH", "path", "/a/b.txt", "", strings.NewReader(`{"mode":384}`)); st != 200 || !strings.Contains(b, `"mode":384`) {
		t.Errorf("updateMetadata: %d %s", st, b)
	}
	if st, _ := c.do(t, "DELETE", "path", "/a", "", nil); st != 204 {
		t.Errorf("remove: %d", st)
	}
	if st, b := c.do(t, "GET", "path", "/a/b.txt", "", nil); st != 404 || !strings.Contains(b, `"code":404`) {
		t.Errorf("stat removed: %d %s", st, b)
	}
	entries, _ := os.ReadDir(c.s.Dir(c.id))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".warren-upload-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

// Paths never leave the volume: ".." is cut at the root, and a symlink
// inside that points out (absolute or relative) is refused.
func TestContentConfined(t *testing.T) {
	c := newContent(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644)
	dir := c.s.Dir(c.id)
	os.Symlink(outside, filepath.Join(dir, "abs"))
	os.Symlink("../../../../../../../.."+outside, filepath.Join(dir, "rel"))
	for _, p := range []string{"abs/secret", "rel/secret", "/abs/secret"} {
		if st, b := c.do(t, "GET", "file", p, "", nil); st == 200 || strings.Contains(b, "secret\"") || b == "secret" {
			t.Errorf("read %s: %d %s, want refused", p, st, b)
		}
		if st, _ := c.do(t, "PUT", "file", p, "&force=true", strings.NewReader("pwn")); st < 400 {
			t.Errorf("write %s: %d, want refused", p, st)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Errorf("outside file changed: %q", b)
	}
	// ".." climbs no higher than the root: this is the volume's own file.
	c.do(t, "PUT", "file", "in.txt", "", strings.NewReader("in"))
	if st, b := c.do(t, "GET", "file", "../../../in.txt", "", nil); st != 200 || b != "in" {
		t.Errorf("../in.txt: %d %q, want the volume's in.txt", st, b)
	}
	if st, _ := c.do(t, "DELETE", "path", "/", "", nil); st != 400 {
		t.Errorf("remove root: %d, want 400", st)
	}
	if st, _ := c.do(t, "DELETE", "path", "abs", "", nil); st != 204 {
		t.Errorf("remove the link itself: %d", st)
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Errorf("removing the link removed its target: %v", err)
	}
}

func TestContentAuth(t *testing.T) {
	c := newContent(t)
	other, _ := c.s.Create(context.Background(), "team", "other")
	for _, tt := range []struct {
		name, token string
		want        int
	}{
		{"none", "", 401},
		{"forged", "abc.def", 401},
		{"another volume's", c.s.Token(other), 403},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c2 := *c
			c2.token = tt.token
			if st, _ := c2.do(t, "GET", "dir", "/", "", nil); st != tt.want {
				t.Errorf("status %d, want %d", st, tt.want)
			}
		})
	}
}

func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"/", "..", "a/../../b", "/a/./b/", "\x00", "a//b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c, err := CleanPath(p)
		if err != nil {
			return
		}
		if strings.HasPrefix(c, "/") || c == ".." || strings.HasPrefix(c, "../") || strings.Contains(c, "/../") {
			t.Fatalf("CleanPath(%q) = %q, leaves the root", p, c)
		}
		if !filepath.IsLocal(c) {
			t.Fatalf("CleanPath(%q) = %q, not local", p, c)
		}
	})
}

// A volume with a size limit is its own filesystem: the content API's
// write past it is 413 and leaves nothing behind. (disk_test.go has the
// filesystem's side.)
func TestContentSizeLimit(t *testing.T) {
	s := newLimited(t, minSizeMB)
	v, err := s.Create(context.Background(), "team", "small")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	c := &contentAPI{srv: srv, s: s, id: v.ID, token: s.Token(v)}
	mb := func(n int) io.Reader { return strings.NewReader(strings.Repeat("x", n<<20)) }
	if st, b := c.do(t, "PUT", "file", "/a", "", mb(6)); st != 201 {
		t.Fatalf("6 MiB: %d %s", st, b)
	}
	if st, b := c.do(t, "PUT", "file", "/b", "", mb(6)); st != 413 || !strings.Contains(b, "size limit") {
		t.Errorf("6 MiB more: %d %s, want 413", st, b)
	}
	if st, _ := c.do(t, "GET", "path", "/b", "", nil); st != 404 {
		t.Errorf("refused write left /b: %d", st)
	}
	if st, b := c.do(t, "PUT", "file", "/c", "", mb(1)); st != 201 {
		t.Errorf("1 MiB after the refused write (its space is back): %d %s", st, b)
	}
}

// A directory swapped for a symlink that leads out while requests run
// never lets one read or write outside: os.Root resolves each step of a
// path under the volume's directory, at the time of the open.
func TestContentSymlinkRace(t *testing.T) {
	c := newContent(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "f"), []byte("outside"), 0o644)
	dir := c.s.Dir(c.id)
	d := filepath.Join(dir, "d")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			os.RemoveAll(d)
			os.Mkdir(d, 0o777)
			os.WriteFile(filepath.Join(d, "f"), []byte("inside"), 0o644)
			os.RemoveAll(d)
			os.Symlink(outside, d)
		}
	}()
	// A read races the rewrite of the file in place: when it finds fewer
	// bytes than the Content-Length it announced, the server cuts the
	// connection, and the next request on it may fail too. Only what
	// is read or written matters here.
	for range 300 {
		if _, b, _ := c.try("GET", "file", "/d/f", "", nil); b == "outside" {
			t.Fatal("read the file outside the volume")
		}
		c.try("PUT", "file", "/d/f", "&force=true", strings.NewReader("pwn"))
	}
	close(stop)
	<-done
	if b, _ := os.ReadFile(filepath.Join(outside, "f")); string(b) != "outside" {
		t.Errorf("the file outside was written: %q", b)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("files appeared outside: %v", entries)
	}
}
