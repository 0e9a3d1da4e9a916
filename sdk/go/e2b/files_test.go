package e2b_test

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/warrenhq/warren/sdk/go/e2b"
)

// files serves /files from a map, as the agent does: octet-stream and multipart uploads,
// gzip both ways, 404 for missing files.
type files struct {
	mu sync.Mutex
	m  map[string]string
}

func (fs *files) install(f *fake) {
	f.mux.HandleFunc("GET /files", func(w http.ResponseWriter, r *http.Request) {
		fs.mu.Lock()
		data, ok := fs.m[r.URL.Query().Get("path")]
		fs.mu.Unlock()
		if !ok {
			apiError(w, 404, "path '"+r.URL.Query().Get("path")+"' does not exist")
			return
		}
		if r.Header.Get("Accept-Encoding") == "gzip" {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, data)
			zw.Close()
			return
		}
		io.WriteString(w, data)
	})
	f.mux.HandleFunc("POST /files", func(w http.ResponseWriter, r *http.Request) {
		body := io.Reader(r.Body)
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				apiError(w, 400, err.Error())
				return
			}
			body = zr
		}
		var written []map[string]string
		save := func(p string, rd io.Reader) {
			b, _ := io.ReadAll(rd)
			if !strings.HasPrefix(p, "/") {
				p = "/home/user/" + p
			}
			fs.mu.Lock()
			fs.m[p] = string(b)
			fs.mu.Unlock()
			written = append(written, map[string]string{"name": path.Base(p), "path": p, "type": "file"})
		}
		if r.Header.Get("Content-Type") == "application/octet-stream" {
			save(r.URL.Query().Get("path"), body)
		} else {
			r.Body = io.NopCloser(body)
			mr, err := r.MultipartReader()
			if err != nil {
				apiError(w, 400, err.Error())
				return
			}
			for part, err := mr.NextPart(); err == nil; part, err = mr.NextPart() {
				// FileName would keep only the base name; the agent writes to the whole path.
				_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
				save(params["filename"], part)
			}
		}
		writeJSON(w, 200, written)
	})
}

func TestReadAndWrite(t *testing.T) {
	f := newFake(t)
	store := &files{m: map[string]string{}}
	store.install(f)
	sbx := f.sandbox(t)
	ctx := context.Background()

	info, err := sbx.Files.Write(ctx, "/home/user/a.txt", []byte("abc"), e2b.WriteOptions{Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if info.Path != "/home/user/a.txt" || info.Name != "a.txt" || info.Type != e2b.FileTypeFile {
		t.Errorf("write info %+v", info)
	}
	r, _ := f.last(t, "/files")
	if r.Header.Get("Content-Type") != "application/octet-stream" || r.Header.Get("X-Metadata-K") != "v" || r.Header.Get("X-Access-Token") != testToken {
		t.Errorf("upload headers %v", r.Header)
	}
	if _, err := sbx.Files.WriteStream(ctx, "/home/user/z.gz", strings.NewReader("zipped"), e2b.WriteOptions{Gzip: true}); err != nil {
		t.Fatal(err)
	}
	for p, gz := range map[string]bool{"/home/user/a.txt": false, "/home/user/z.gz": true} {
		b, err := sbx.Files.Read(ctx, p, e2b.ReadOptions{Gzip: gz})
		if err != nil || string(b) != store.m[p] || len(b) == 0 {
			t.Errorf("read %s (gzip %v) = %q, %v", p, gz, b, err)
		}
	}
	_, err = sbx.Files.Read(ctx, "/nope", e2b.ReadOptions{})
	var missing *e2b.FileNotFoundError
	if !errors.As(err, &missing) || !errors.As(err, new(*e2b.NotFoundError)) || missing.Message != "path '/nope' does not exist" {
		t.Errorf("read missing: %T %v", err, err)
	}
}

func TestWriteFilesIsOneMultipartRequest(t *testing.T) {
	f := newFake(t)
	store := &files{m: map[string]string{}}
	store.install(f)
	sbx := f.sandbox(t)
	infos, err := sbx.Files.WriteFiles(context.Background(), []e2b.WriteEntry{
		{Path: "/0/abs.txt", Data: strings.NewReader("one")},
		{Path: "rel.txt", Data: strings.NewReader("two")},
	}, e2b.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].Path != "/0/abs.txt" || infos[1].Path != "/home/user/rel.txt" || store.m["/home/user/rel.txt"] != "two" {
		t.Errorf("infos %+v, store %v", infos, store.m)
	}
	if n := f.count("/files"); n != 1 {
		t.Errorf("%d requests", n)
	}
}

func TestFilesystemRPCs(t *testing.T) {
	f := newFake(t)
	sbx := f.sandbox(t)
	ctx := context.Background()
	if ok, err := sbx.Files.Exists(ctx, "/home/user/a.txt", e2b.FileOptions{}); !ok || err != nil {
		t.Errorf("exists a.txt = %v %v", ok, err)
	}
	if ok, err := sbx.Files.Exists(ctx, "/home/user/b.txt", e2b.FileOptions{}); ok || err != nil {
		t.Errorf("exists b.txt = %v %v", ok, err)
	}
	info, err := sbx.Files.GetInfo(ctx, "/home/user/a.txt", e2b.FileOptions{})
	if err != nil || info.Mode != 0o644 || info.Owner != "user" || info.Permissions != "-rw-r--r--" {
		t.Errorf("info = %+v %v", info, err)
	}
	if _, err := sbx.Files.GetInfo(ctx, "/x", e2b.FileOptions{}); !errors.As(err, new(*e2b.FileNotFoundError)) {
		t.Errorf("info of a missing path: %T %v", err, err)
	}
	if made, err := sbx.Files.MakeDir(ctx, "/home/user", e2b.FileOptions{}); made || err != nil {
		t.Errorf("makeDir existing = %v %v", made, err)
	}
	if made, err := sbx.Files.MakeDir(ctx, "/home/user/new", e2b.FileOptions{}); !made || err != nil {
		t.Errorf("makeDir new = %v %v", made, err)
	}
	list, err := sbx.Files.List(ctx, "/home/user", e2b.ListDirOptions{})
	if err != nil || len(list) != 2 || list[1].Type != e2b.FileTypeDir {
		t.Errorf("list (entries of unknown type left out) = %+v %v", list, err)
	}
	if _, err := sbx.Files.List(ctx, "/home/user", e2b.ListDirOptions{Depth: -1}); !errors.As(err, new(*e2b.InvalidArgumentError)) {
		t.Errorf("negative depth: %v", err)
	}
}
