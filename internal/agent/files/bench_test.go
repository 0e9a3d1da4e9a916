package files

import (
	"bytes"
	"net/http"
	"path/filepath"
	"testing"
)

// BenchmarkUpload measures upload throughput over loopback; the goal is at
// least 300 MB/s. Run: go test -bench Upload -benchtime 5x ./internal/agent/files
func BenchmarkUpload(b *testing.B) {
	const size = 64 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	for _, mode := range []string{"octet-stream", "multipart"} {
		b.Run(mode, func(b *testing.B) {
			f := newFixture(b)
			dst := filepath.Join(f.dir, "big")
			mp, ctype := multipartBody(b, part{"file", dst, string(data)})
			b.SetBytes(size)
			for b.Loop() {
				var req *http.Request
				if mode == "multipart" {
					req, _ = http.NewRequest(http.MethodPost, f.url, bytes.NewReader(mp.Bytes()))
					req.Header.Set("Content-Type", ctype)
				} else {
					req, _ = http.NewRequest(http.MethodPost, f.fileURL("path", dst), bytes.NewReader(data))
					req.Header.Set("Content-Type", "application/octet-stream")
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					b.Fatalf("status %d", res.StatusCode)
				}
			}
		})
	}
}
