//go:build e2e

// End to end: files, watches and signed URLs.

package e2b_test

import (
	"bytes"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/sdk/go/e2b"
)

// sandbox/files/write, read, exists, remove, info, contentEncoding
func TestE2EFilesReadWrite(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	info, err := sbx.Files.Write(ctx, "test_write.txt", []byte("This is a test file."), e2b.WriteOptions{})
	if err != nil || info.Path != "/home/user/test_write.txt" || info.Name != "test_write.txt" || info.Type != e2b.FileTypeFile {
		t.Fatalf("write = %+v %v", info, err)
	}
	if ok, err := sbx.Files.Exists(ctx, "test_write.txt", e2b.FileOptions{}); !ok || err != nil {
		t.Errorf("exists = %v %v", ok, err)
	}
	if b, err := sbx.Files.Read(ctx, "test_write.txt", e2b.ReadOptions{}); string(b) != "This is a test file." || err != nil {
		t.Errorf("read = %q %v", b, err)
	}
	sbx.Files.Write(ctx, "test_write.txt", []byte("New"), e2b.WriteOptions{})
	if b, _ := sbx.Files.Read(ctx, "test_write.txt", e2b.ReadOptions{}); string(b) != "New" {
		t.Errorf("overwritten = %q", b)
	}
	stat, err := sbx.Files.GetInfo(ctx, "/home/user/test_write.txt", e2b.FileOptions{})
	if err != nil || stat.Size != 3 || stat.Mode != 0o644 || stat.Permissions != "-rw-r--r--" || stat.Owner != "user" || stat.Group != "user" || stat.ModTime.IsZero() {
		t.Errorf("info = %+v %v", stat, err)
	}
	if err := sbx.Files.Remove(ctx, "test_write.txt", e2b.FileOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := sbx.Files.Exists(ctx, "test_write.txt", e2b.FileOptions{}); ok || err != nil {
		t.Errorf("exists after remove = %v %v", ok, err)
	}
	if err := sbx.Files.Remove(ctx, "never-there", e2b.FileOptions{}); err != nil {
		t.Errorf("remove of a missing path: %v", err)
	}
	if _, err := sbx.Files.Read(ctx, "missing.txt", e2b.ReadOptions{}); !errors.As(err, new(*e2b.FileNotFoundError)) {
		t.Errorf("read of a missing file: %T %v", err, err)
	}
	if _, err := sbx.Files.GetInfo(ctx, "missing.txt", e2b.FileOptions{}); !errors.As(err, new(*e2b.FileNotFoundError)) {
		t.Errorf("info of a missing file: %T %v", err, err)
	}

	// Empty files, gzip both ways, streams.
	if _, err := sbx.Files.Write(ctx, "empty.txt", nil, e2b.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, err := sbx.Files.Read(ctx, "empty.txt", e2b.ReadOptions{}); len(b) != 0 || err != nil {
		t.Errorf("empty = %q %v", b, err)
	}
	big := strings.Repeat("compressible line\n", 20000)
	for _, gz := range []struct{ up, down bool }{{true, false}, {false, true}, {true, true}} {
		if _, err := sbx.Files.WriteStream(ctx, "big.txt", strings.NewReader(big), e2b.WriteOptions{Gzip: gz.up}); err != nil {
			t.Fatal(err)
		}
		r, err := sbx.Files.ReadStream(ctx, "big.txt", e2b.ReadOptions{Gzip: gz.down})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if string(b) != big || err != nil {
			t.Errorf("gzip %+v: %d bytes back, %v", gz, len(b), err)
		}
	}
	if _, err := sbx.Files.Write(ctx, "/root/root.txt", []byte("r"), e2b.WriteOptions{User: "root"}); err != nil {
		t.Fatal(err)
	}
	if st, err := sbx.Files.GetInfo(ctx, "/root/root.txt", e2b.FileOptions{User: "root"}); err != nil || st.Owner != "root" {
		t.Errorf("as root = %+v %v", st, err)
	}
}

// sandbox/files/write (write many)
func TestE2EWriteFiles(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	if infos, err := sbx.Files.WriteFiles(ctx, nil, e2b.WriteOptions{}); len(infos) != 0 || err != nil {
		t.Errorf("no files = %v %v", infos, err)
	}
	entries := []e2b.WriteEntry{
		{Path: "multi/one.txt", Data: strings.NewReader("one")},
		{Path: "/tmp/multi/two.txt", Data: strings.NewReader("two")},
		{Path: "three.txt", Data: strings.NewReader("three")},
	}
	infos, err := sbx.Files.WriteFiles(ctx, entries, e2b.WriteOptions{})
	if err != nil || len(infos) != 3 {
		t.Fatalf("write files = %+v %v", infos, err)
	}
	want := map[string]string{"/home/user/multi/one.txt": "one", "/tmp/multi/two.txt": "two", "/home/user/three.txt": "three"}
	for i, info := range infos {
		if _, ok := want[info.Path]; !ok {
			t.Errorf("info %d: %+v", i, info)
			continue
		}
		if b, err := sbx.Files.Read(ctx, info.Path, e2b.ReadOptions{}); string(b) != want[info.Path] || err != nil {
			t.Errorf("%s = %q %v", info.Path, b, err)
		}
	}
}

// sandbox/files/list, makeDir, rename
func TestE2EListMakeDirRename(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	parent := "test_directory"
	for _, d := range []string{"", "/subdir1", "/subdir2", "/subdir1/subdir1_1", "/subdir1/subdir1_2", "/subdir2/subdir2_1", "/subdir2/subdir2_2"} {
		if made, err := sbx.Files.MakeDir(ctx, parent+d, e2b.FileOptions{}); !made || err != nil {
			t.Fatalf("makeDir %s = %v %v", d, made, err)
		}
	}
	if made, err := sbx.Files.MakeDir(ctx, parent, e2b.FileOptions{}); made || err != nil {
		t.Errorf("makeDir of an existing dir = %v %v", made, err)
	}
	sbx.Files.Write(ctx, parent+"/file1.txt", []byte("Hello, world!"), e2b.WriteOptions{})
	for _, tc := range []struct {
		depth int
		names []string
	}{
		{0, []string{"file1.txt", "subdir1", "subdir2"}},
		{1, []string{"file1.txt", "subdir1", "subdir2"}},
		{2, []string{"file1.txt", "subdir1", "subdir1_1", "subdir1_2", "subdir2", "subdir2_1", "subdir2_2"}},
	} {
		got, err := sbx.Files.List(ctx, parent, e2b.ListDirOptions{Depth: tc.depth})
		var names []string
		for _, e := range got {
			names = append(names, e.Name)
		}
		if err != nil || strings.Join(names, ",") != strings.Join(tc.names, ",") || got[0].Type != e2b.FileTypeFile || got[1].Type != e2b.FileTypeDir || got[0].Path != "/home/user/"+parent+"/file1.txt" {
			t.Errorf("depth %d: %v %v", tc.depth, names, err)
		}
	}
	if _, err := sbx.Files.List(ctx, parent, e2b.ListDirOptions{Depth: -1}); !errors.As(err, new(*e2b.InvalidArgumentError)) {
		t.Errorf("depth -1: %v", err)
	}
	moved, err := sbx.Files.Rename(ctx, parent+"/file1.txt", parent+"/deeper/renamed.txt", e2b.FileOptions{})
	if err != nil || moved.Path != "/home/user/"+parent+"/deeper/renamed.txt" || moved.Name != "renamed.txt" {
		t.Fatalf("rename = %+v %v", moved, err)
	}
	if ok, _ := sbx.Files.Exists(ctx, parent+"/file1.txt", e2b.FileOptions{}); ok {
		t.Error("the old path still exists")
	}
	if _, err := sbx.Files.Rename(ctx, "nope", "nope2", e2b.FileOptions{}); !errors.As(err, new(*e2b.FileNotFoundError)) {
		t.Errorf("rename of a missing path: %T %v", err, err)
	}
	if _, err := sbx.Files.List(ctx, "no_such_dir", e2b.ListDirOptions{}); !errors.As(err, new(*e2b.FileNotFoundError)) {
		t.Errorf("list of a missing dir: %T %v", err, err)
	}
}

// sandbox/files/signing
func TestE2ESignedURLs(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	sbx.Files.Write(ctx, "hello.txt", []byte("hello world"), e2b.WriteOptions{})
	get := func(u string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		route(req, sbx)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	u, err := sbx.DownloadURL("hello.txt", e2b.URLOptions{Expires: 10000 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(u); code != 200 || body != "hello world" {
		t.Errorf("valid signature: %d %s", code, body)
	}
	u, _ = sbx.DownloadURL("hello.txt", e2b.URLOptions{Expires: -10000 * time.Second})
	if code, body := get(u); code != 401 || !strings.Contains(body, "signature is already expired") {
		t.Errorf("expired signature: %d %s", code, body)
	}
	u, _ = sbx.UploadURL("/home/user/uploaded.txt", e2b.URLOptions{})
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	part, _ := mw.CreateFormFile("file", "uploaded.txt")
	part.Write([]byte("up"))
	mw.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, &form)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	route(req, sbx)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("signed upload: %v %v", res, err)
	}
	res.Body.Close()
	if b, err := sbx.Files.Read(ctx, "uploaded.txt", e2b.ReadOptions{}); string(b) != "up" || err != nil {
		t.Errorf("uploaded = %q %v", b, err)
	}
}

// route adds the routing headers a shared sandbox URL (E2B_SANDBOX_URL) needs; a URL of the
// sandbox's own host needs none.
func route(req *http.Request, sbx *e2b.Sandbox) {
	req.Header.Set("E2b-Sandbox-Id", sbx.ID)
	req.Header.Set("E2b-Sandbox-Port", "49983")
}

// sandbox/files/watch
func TestE2EWatchDir(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	sbx.Files.MakeDir(ctx, "watched/sub", e2b.FileOptions{})
	w, err := sbx.Files.WatchDir(ctx, "watched", e2b.WatchOptions{Recursive: true, IncludeEntry: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sbx.Files.Write(ctx, "watched/sub/file.txt", []byte("changed"), e2b.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(20 * time.Second)
	for seen := false; !seen; {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("the watch ended: %v", w.Err())
			}
			if ev.Name == "sub/file.txt" && ev.Type == e2b.EventWrite {
				seen = true
				if ev.Entry == nil || ev.Entry.Path != "/home/user/watched/sub/file.txt" {
					t.Errorf("entry %+v", ev.Entry)
				}
			}
		case <-timeout:
			t.Fatal("no write event for sub/file.txt")
		}
	}
	w.Stop()
	for range w.Events() {
	}
	if w.Err() != nil {
		t.Errorf("err after stop: %v", w.Err())
	}
	if _, err := sbx.Files.WatchDir(ctx, "no_such_dir", e2b.WatchOptions{}); !errors.As(err, new(*e2b.FileNotFoundError)) {
		t.Errorf("watch of a missing dir: %T %v", err, err)
	}
	sbx.Files.Write(ctx, "plain.txt", []byte("x"), e2b.WriteOptions{})
	if _, err := sbx.Files.WatchDir(ctx, "plain.txt", e2b.WatchOptions{}); !errors.As(err, new(*e2b.SandboxError)) {
		t.Errorf("watch of a file: %T %v", err, err)
	}
}
