package template_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/internal/store/sqlite"
	"github.com/warrenhq/warren/internal/template"
)

// entry is one tar entry for archive.
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

// archive returns a gzipped tar of entries, as the SDK uploads.
func archive(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: e.typ, Linkname: e.link}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func hashOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// testBuiltins are the built-in templates as the server has them.
var testBuiltins = map[string]template.Source{
	"base":                {Image: "warren/base"},
	"code-interpreter-v1": {Image: "warren/code-interpreter", AgentArgs: []string{"-code-interpreter"}},
}

// newRegistry returns a started registry on a fresh store in a temp dir.
func newRegistry(t *testing.T, engine template.Engine, maxBuilds int) (*template.Registry, *sqlite.DB, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	reg, err := template.New(template.Config{Store: db, Engine: engine, Dir: dir, MaxConcurrentBuilds: maxBuilds,
		Builtins: testBuiltins, Snapshots: db})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg, db, dir
}

// upload stores body as team's files with its hash through the registry's
// own upload path.
func upload(t *testing.T, reg *template.Registry, team, templateID string, body []byte) string {
	t.Helper()
	h := hashOf(body)
	present, tok, err := reg.FileUpload(context.Background(), team, templateID, h)
	if err != nil {
		t.Fatal(err)
	}
	if !present {
		if err := reg.Upload(tok, int64(len(body)), bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	return h
}
