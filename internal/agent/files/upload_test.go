package files

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/agent/filesystem"
	"github.com/warrenhq/warren/internal/warrentest"
)

// part is one multipart part: form name, filename, content.
type part struct{ form, filename, content string }

func multipartBody(t testing.TB, parts ...part) (*bytes.Buffer, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		// Written by hand: CreateFormFile escapes nothing we rely on, but
		// it always adds a filename, and some parts have none.
		cd := `form-data; name="` + p.form + `"`
		if p.filename != "" {
			cd += `; filename="` + p.filename + `"`
		}
		h.Set("Content-Disposition", cd)
		h.Set("Content-Type", "application/octet-stream")
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, p.content); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return &b, mw.FormDataContentType()
}

func decodeUploaded(t *testing.T, r response) []uploaded {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("status = %d: %s", r.status, r.body)
	}
	var got []uploaded
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return got
}

func TestUploadOctetStream(t *testing.T) {
	f := newFixture(t)
	dst := filepath.Join(f.dir, "new", "dir", "hello.txt")
	r := do(t, newRequest(t, http.MethodPost, f.fileURL("path", dst), strings.NewReader("hi"), "Content-Type", "application/octet-stream"))
	if r.body != `[{"path":"`+dst+`","name":"hello.txt","type":"file"}]`+"\n" {
		t.Errorf("body = %q: metadata must be omitted when empty", r.body)
	}
	if got := warrentest.ReadFile(t, dst); got != "hi" {
		t.Errorf("content = %q", got)
	}
	old := syscall.Umask(0)
	syscall.Umask(old)
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if want := os.FileMode(0o666 &^ old); fi.Mode().Perm() != want {
		t.Errorf("mode = %v, want %v", fi.Mode().Perm(), want)
	}
	if fi, err := os.Stat(filepath.Dir(dst)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("parent: %v %v, want a 0755 directory", fi, err)
	}
	// A second upload truncates.
	do(t, newRequest(t, http.MethodPost, f.fileURL("path", dst), strings.NewReader("x"), "Content-Type", "application/octet-stream"))
	if got := warrentest.ReadFile(t, dst); got != "x" {
		t.Errorf("after overwrite content = %q", got)
	}
}

func TestUploadGzip(t *testing.T) {
	f := newFixture(t)
	dst := filepath.Join(f.dir, "z.txt")
	content := strings.Repeat("compress me ", 10000)
	r := do(t, newRequest(t, http.MethodPost, f.fileURL("path", dst), gzipped(t, content), "Content-Type", "application/octet-stream", "Content-Encoding", "gzip"))
	decodeUploaded(t, r)
	if got := warrentest.ReadFile(t, dst); got != content {
		t.Errorf("content has %d bytes, want %d", len(got), len(content))
	}

	body, ctype := multipartBody(t, part{"file", dst, "via multipart"})
	r = do(t, newRequest(t, http.MethodPost, f.url, gzipped(t, body.String()), "Content-Type", ctype, "Content-Encoding", "gzip"))
	decodeUploaded(t, r)
	if got := warrentest.ReadFile(t, dst); got != "via multipart" {
		t.Errorf("content = %q", got)
	}
}

func TestUploadMultipart(t *testing.T) {
	f := newFixture(t)
	a, b := filepath.Join(f.dir, "a.txt"), filepath.Join(f.dir, "sub", "b.txt")
	body, ctype := multipartBody(t,
		part{"file", b, "bee"},
		part{"other", "ignored", "nothing"},
		part{"file", a, "ay"},
	)
	got := decodeUploaded(t, do(t, newRequest(t, http.MethodPost, f.url, body, "Content-Type", ctype)))
	want := []uploaded{{Path: b, Name: "b.txt", Type: "file"}, {Path: a, Name: "a.txt", Type: "file"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	if warrentest.ReadFile(t, a) != "ay" || warrentest.ReadFile(t, b) != "bee" {
		t.Errorf("contents %q %q", warrentest.ReadFile(t, a), warrentest.ReadFile(t, b))
	}

	// The path query wins over the filename, as the SDK's single write does.
	q := filepath.Join(f.dir, "query.txt")
	body, ctype = multipartBody(t, part{"file", "ignored-name.txt", "q"})
	got = decodeUploaded(t, do(t, newRequest(t, http.MethodPost, f.fileURL("path", q), body, "Content-Type", ctype)))
	if len(got) != 1 || got[0].Path != q || warrentest.ReadFile(t, q) != "q" {
		t.Errorf("got %v", got)
	}
}

func TestUploadMetadata(t *testing.T) {
	f := newFixture(t)
	dst := filepath.Join(f.dir, "m.txt")
	r := do(t, newRequest(t, http.MethodPost, f.fileURL("path", dst), strings.NewReader("x"),
		"Content-Type", "application/octet-stream", "X-Metadata-Owner-Team", "Infra", "X-Metadata-Build", "42"))
	got := decodeUploaded(t, r)
	want := map[string]string{"owner-team": "Infra", "build": "42"}
	if diff := cmp.Diff(want, got[0].Metadata); diff != "" {
		t.Errorf("response metadata (-want +got):\n%s", diff)
	}
	stored, err := filesystem.ReadMetadata(dst)
	if err != nil {
		t.Fatal(err)
	}
	if stored == nil {
		t.Skip("filesystem of the temp dir stores no xattrs")
	}
	if diff := cmp.Diff(want, stored); diff != "" {
		t.Errorf("stored metadata (-want +got):\n%s", diff)
	}
	// Each upload replaces the whole set.
	do(t, newRequest(t, http.MethodPost, f.fileURL("path", dst), strings.NewReader("y"), "Content-Type", "application/octet-stream", "X-Metadata-Build", "43"))
	stored, _ = filesystem.ReadMetadata(dst)
	if diff := cmp.Diff(map[string]string{"build": "43"}, stored); diff != "" {
		t.Errorf("replaced metadata (-want +got):\n%s", diff)
	}
}

func TestUploadErrors(t *testing.T) {
	f := newFixture(t)
	file := filepath.Join(f.dir, "file")
	warrentest.WriteFile(t, file, "x")
	octet := []string{"Content-Type", "application/octet-stream"}
	twice := filepath.Join(f.dir, "twice")
	dup, dupType := multipartBody(t, part{"file", twice, "1"}, part{"file", f.dir + "/./twice", "2"})
	dupQuery, dupQueryType := multipartBody(t, part{"file", "a", "1"}, part{"file", "b", "2"})
	noName, noNameType := multipartBody(t, part{"file", "", "1"})
	noFile, noFileType := multipartBody(t, part{"other", "x", "1"})
	tests := []struct {
		name   string
		url    string
		body   io.Reader
		header []string
		status int
		msg    string
	}{
		{"octet-stream without path", f.url, strings.NewReader("x"), octet, 400, ""},
		{"no content type", f.fileURL("path", filepath.Join(f.dir, "n")), strings.NewReader("x"), nil, 400, ""},
		{"other content type", f.fileURL("path", filepath.Join(f.dir, "n")), strings.NewReader("x"), []string{"Content-Type", "text/plain"}, 400, ""},
		{"unsupported encoding", f.fileURL("path", filepath.Join(f.dir, "n")), strings.NewReader("x"), append(octet, "Content-Encoding", "br"), 400, "unsupported Content-Encoding 'br' (only gzip is supported)"},
		{"invalid gzip", f.fileURL("path", filepath.Join(f.dir, "n")), strings.NewReader("not gzip at all"), append(octet, "Content-Encoding", "gzip"), 400, ""},
		{"truncated gzip", f.fileURL("path", filepath.Join(f.dir, "n")), bytes.NewReader(gzipped(t, strings.Repeat("abc", 1000)).Bytes()[:40]), append(octet, "Content-Encoding", "gzip"), 400, ""},
		{"parent is a file", f.fileURL("path", filepath.Join(file, "child")), strings.NewReader("x"), octet, 400, "a parent of path '" + filepath.Join(file, "child") + "' is not a directory"},
		{"target is a directory", f.fileURL("path", f.dir), strings.NewReader("x"), octet, 400, "path '" + f.dir + "' is a directory"},
		{"same path twice", f.url, dup, []string{"Content-Type", dupType}, 400, "path '" + twice + "' is uploaded more than once in one request"},
		{"path query with two parts", f.fileURL("path", filepath.Join(f.dir, "q")), dupQuery, []string{"Content-Type", dupQueryType}, 400, ""},
		{"part without filename", f.url, noName, []string{"Content-Type", noNameType}, 400, ""},
		{"no file part", f.url, noFile, []string{"Content-Type", noFileType}, 400, ""},
		{"malformed multipart", f.url, strings.NewReader("--b\r\nnot a header\r\n\r\n"), []string{"Content-Type", "multipart/form-data; boundary=b"}, 400, ""},
		{"truncated multipart part", f.url, strings.NewReader("--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + filepath.Join(f.dir, "t") + "\"\r\n\r\npartial"), []string{"Content-Type", "multipart/form-data; boundary=b"}, 400, ""},
		{"multipart without boundary", f.url, strings.NewReader(""), []string{"Content-Type", "multipart/form-data"}, 400, ""},
		{"NUL in path", f.fileURL("path", f.dir+"/a\x00"), strings.NewReader("x"), octet, 400, ""},
		{"huge path", f.fileURL("path", f.dir+"/"+strings.Repeat("x", 300)), strings.NewReader("x"), octet, 400, ""},
		{"metadata key too long", f.fileURL("path", filepath.Join(f.dir, "n")), strings.NewReader("x"), append(octet, "X-Metadata-"+strings.Repeat("k", 247), "v"), 400, ""},
		{"metadata not ASCII", f.fileURL("path", filepath.Join(f.dir, "n")), strings.NewReader("x"), append(octet, "X-Metadata-K", "naïve"), 400, ""},
		{"metadata too large", f.fileURL("path", filepath.Join(f.dir, "n")), strings.NewReader("x"), append(octet, "X-Metadata-A", strings.Repeat("v", 3000), "X-Metadata-B", strings.Repeat("v", 3000)), 400, "metadata is larger than 4096 bytes in total"},
		{"wrong method", f.url, nil, []string{}, 405, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPost
			if tc.status == 405 {
				method = http.MethodPut
			}
			wantError(t, do(t, newRequest(t, method, tc.url, tc.body, tc.header...)), tc.status, tc.msg)
		})
	}
}

func TestUploadChownsToUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the agent chowns uploads to another user, which only root may do")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user 'nobody' on this system")
	}
	f := newFixture(t)
	warrentest.GiveDir(t, f.dir, nobody)
	dst := filepath.Join(f.dir, "made", "by", "nobody.txt")
	decodeUploaded(t, do(t, newRequest(t, http.MethodPost, f.fileURL("path", dst, "username", "nobody"), strings.NewReader("x"), "Content-Type", "application/octet-stream")))
	for _, p := range []string{dst, filepath.Dir(dst), filepath.Join(f.dir, "made")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; nobody.Uid != itoa(uid) {
			t.Errorf("%s uid = %d, want %s", p, uid, nobody.Uid)
		}
	}
}

func TestUploadNoSpace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tiny tmpfs")
	}
	f := newFixture(t)
	mnt := filepath.Join(f.dir, "tiny")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount tmpfs here: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, 0) })
	r := do(t, newRequest(t, http.MethodPost, f.fileURL("path", filepath.Join(mnt, "big")), bytes.NewReader(make([]byte, 1<<20)), "Content-Type", "application/octet-stream"))
	wantError(t, r, http.StatusInsufficientStorage, "")
}

// A new file is created, chowned and written, as E2B's agent does it:
// watchers see create, chmod, write, and E2B's own tests count them.
func TestUploadEventsAsE2B(t *testing.T) {
	f := newFixture(t)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(f.dir); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(f.dir, "watched.txt")
	do(t, newRequest(t, http.MethodPost, f.fileURL("path", dst), strings.NewReader("hi"), "Content-Type", "application/octet-stream"))
	var ops []string
	for timeout := time.After(2 * time.Second); len(ops) < 3; {
		select {
		case ev := <-w.Events:
			ops = append(ops, ev.Op.String())
		case <-timeout:
			t.Fatalf("events %v, want CREATE, CHMOD, WRITE", ops)
		}
	}
	if want := []string{"CREATE", "CHMOD", "WRITE"}; !slices.Equal(ops, want) {
		t.Errorf("events %v, want %v", ops, want)
	}
}
