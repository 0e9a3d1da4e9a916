package files

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/internal/agent/state"
)

// FuzzUploadMultipart feeds arbitrary multipart bodies and Content-Types to
// POST /files. The destination is pinned by the path query to a temp dir:
// the agent runs as root, and a fuzzed filename must not land anywhere on
// this machine. Invariants: only 200 or 400, and a 200 wrote exactly the
// first `file` part.
func FuzzUploadMultipart(f *testing.F) {
	cur, err := user.Current()
	if err != nil {
		f.Fatal(err)
	}
	st := state.New()
	st.SetDefaultUser(cur.Username)
	h := New(st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	dir := f.TempDir()
	dst := filepath.Join(dir, "out")
	target := "/files?" + url.Values{"path": {dst}}.Encode()

	f.Add("multipart/form-data; boundary=B", []byte("--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nhello\r\n--B--\r\n"), false)
	f.Add("multipart/mixed; boundary=xyz", []byte("--xyz\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n\r\n--xyz--"), true)
	f.Add("multipart/form-data; boundary=\"q b\"", []byte("--q b\r\nContent-Disposition: form-data; name=file\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\na=3Db\r\n--q b--\r\n"), false)

	f.Fuzz(func(t *testing.T, ctype string, body []byte, gz bool) {
		os.Remove(dst)
		reqBody := body
		if gz {
			reqBody = gzipped(t, string(body)).Bytes()
		}
		req := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(reqBody))
		req.Header.Set("Content-Type", ctype)
		if gz {
			req.Header.Set("Content-Encoding", "gzip")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusBadRequest:
			return
		case http.StatusOK:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		var res []uploaded
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || len(res) != 1 || res[0].Path != dst {
			t.Fatalf("response %q (%v), want one entry for %s", rec.Body, err, dst)
		}
		got, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if want := firstFilePart(t, ctype, body); !bytes.Equal(got, want) {
			t.Fatalf("wrote %q, want the first file part %q", got, want)
		}
	})
}

// firstFilePart reads the first `file` part of an accepted body.
func firstFilePart(t *testing.T, ctype string, body []byte) []byte {
	_, params, err := mime.ParseMediaType(ctype)
	if err != nil {
		t.Fatalf("accepted Content-Type %q: %v", ctype, err)
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			t.Fatal("accepted a body without a file part")
		}
		if err != nil {
			t.Fatalf("accepted a body Go cannot parse: %v", err)
		}
		if p.FormName() == "file" {
			b, err := io.ReadAll(p)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}
