package baseimage

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/runtime/docker"
)

func TestConfigNormalize(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantTag string
		wantErr string
	}{
		{name: "default tag", cfg: Config{CacheDir: "/c"}, wantTag: "warren/base:latest"},
		{name: "explicit tag", cfg: Config{Tag: "warren/base:dev", CacheDir: "/c"}, wantTag: "warren/base:dev"},
		{name: "upper case", cfg: Config{Tag: "Warren/Base", CacheDir: "/c"}, wantErr: "not a valid image name"},
		{name: "digest", cfg: Config{Tag: "warren/base@sha256:" + strings.Repeat("a", 64), CacheDir: "/c"}, wantErr: "has a digest"},
		{name: "bad mirror", cfg: Config{Mirror: "ftp://x/debian", CacheDir: "/c"}, wantErr: "http:// or https://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.normalize()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("normalize error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("normalize: %v", err)
			}
			if got.Tag != tt.wantTag {
				t.Errorf("Tag = %q, want %q", got.Tag, tt.wantTag)
			}
		})
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	got, err := DefaultCacheDir()
	if err != nil || got != "/xdg/warren" {
		t.Errorf("DefaultCacheDir() = %q, %v; want /xdg/warren", got, err)
	}
}

func TestLineWriter(t *testing.T) {
	var out bytes.Buffer
	w := newProgress(&out).prefixed("debootstrap")
	w.Write([]byte("I: Retrieving a\nI: Retr"))
	w.Write([]byte("ieving b\r\nno newline"))
	w.Flush()
	want := "    debootstrap: I: Retrieving a\n    debootstrap: I: Retrieving b\n    debootstrap: no newline\n"
	if out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

func TestUnescapeMountPath(t *testing.T) {
	if got := unescapeMountPath(`/a\040b\134c`); got != `/a b\c` {
		t.Errorf("unescapeMountPath = %q", got)
	}
}

func TestLockCache(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockCache(dir); err == nil || !strings.Contains(err.Error(), "another warren image build") {
		t.Errorf("second lock: %v, want a message naming the other build", err)
	}
	unlock()
	unlock2, err := lockCache(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}

// TestBuild runs the real build: root, debootstrap, a Debian mirror and a Docker engine, and
// minutes. CI builds the image through test.sh anyway; set WARREN_TEST_IMAGE_BUILD=1 to run it here.
func TestBuild(t *testing.T) {
	if os.Getenv("WARREN_TEST_IMAGE_BUILD") != "1" {
		t.Skip("set WARREN_TEST_IMAGE_BUILD=1 to build the base image (needs root, debootstrap, Docker, a Debian mirror)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	cacheDir := os.Getenv("WARREN_TEST_CACHE_DIR") // reuse downloads between runs
	if cacheDir == "" {
		cacheDir = filepath.Join(t.TempDir(), "cache")
	}
	const tag = "warren/base:test"
	build := func(force bool) Result {
		cli, err := docker.Connect()
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		b, err := NewBuilder(Config{Tag: tag, CacheDir: cacheDir, Force: force}, cli, t.Output())
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.Build(ctx)
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		return res
	}
	first := build(true)
	t.Cleanup(func() { exec.Command("docker", "rmi", tag).Run() })
	if second := build(false); !second.Reused || second.ImageID != first.ImageID {
		t.Errorf("second build = %+v, want reuse of %s", second, first.ImageID)
	}
	checks := [][]string{
		{"id", "user"},
		{"python3", "--version"},
		{"node", "--version"},
		{"sh", "-c", "TERM=xterm tput cols"},
		{"runuser", "-u", "user", "--", "sudo", "-n", "true"},
		{"runuser", "-u", "user", "--", "touch", "/usr/local/bin/x", "/code/x", "/home/user/x"},
	}
	for _, c := range checks {
		out, err := exec.CommandContext(ctx, "docker", append([]string{"run", "--rm", tag}, c...)...).CombinedOutput()
		if err != nil {
			t.Errorf("docker run %s %v: %v\n%s", tag, c, err, out)
		}
	}
}
