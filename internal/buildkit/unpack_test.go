package buildkit

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestUnpack(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body string) {
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	add(&tar.Header{Name: "Dockerfile", Mode: 0o600, Typeflag: tar.TypeReg}, "FROM x\n")
	add(&tar.Header{Name: "ctx/1/run.sh", Mode: 0o755, Typeflag: tar.TypeReg}, "#!/bin/sh\n")
	add(&tar.Header{Name: "ctx/1/link", Linkname: "run.sh", Typeflag: tar.TypeSymlink}, "")
	add(&tar.Header{Name: "ctx/2/", Mode: 0o750, Typeflag: tar.TypeDir}, "")
	tw.Close()
	dir := t.TempDir()
	if err := unpack(bytes.NewReader(buf.Bytes()), dir); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{"Dockerfile": 0o600, "ctx/1/run.sh": 0o755, "ctx/2": 0o750 | os.ModeDir} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode(), mode)
		}
	}
	if l, err := os.Readlink(filepath.Join(dir, "ctx/1/link")); err != nil || l != "run.sh" {
		t.Errorf("link = %q, %v", l, err)
	}
}

func TestUnpackRefusesEscapes(t *testing.T) {
	for _, name := range []string{"../x", "/etc/x"} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Typeflag: tar.TypeReg})
		tw.Close()
		if err := unpack(bytes.NewReader(buf.Bytes()), t.TempDir()); err == nil {
			t.Errorf("%s: unpacked", name)
		}
	}
}
