package docker

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeProc writes /proc/<pid>/cmdline (args joined by NULs) and an exe
// link under a temporary directory, as the host's /proc shows a process.
func fakeProc(t *testing.T, pid string, args ...string) string {
	t.Helper()
	proc := t.TempDir()
	dir := filepath.Join(proc, pid)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.Join(args, "\x00")+"\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(os.Args[0], filepath.Join(dir, "exe")); err != nil {
		t.Fatal(err)
	}
	return proc
}

func TestRunscOf(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		wantRoot string // "" = not a runsc sandbox
	}{
		{"root with =", []string{"runsc-sandbox", "--log=/x/log.json", "--overlay2=none", "--root=/run/e/runtime-runc/moby", "--log-fd=3", "boot", "--bundle=/b", "c1"}, "/run/e/runtime-runc/moby"},
		{"root apart", []string{"runsc-sandbox", "-root", "/run/r", "boot", "c1"}, "/run/r"},
		{"root of boot ignored", []string{"runsc-sandbox", "boot", "--root=/not/this", "c1"}, ""},
		{"no root", []string{"runsc-sandbox", "--log=/x", "boot", "c1"}, ""},
		{"runc's init", []string{"/sbin/docker-init", "--", "sleep", "1"}, ""},
		{"runsc but no sandbox", []string{"runsc-gofer", "--root=/run/r", "gofer"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc := fakeProc(t, "42", tc.args...)
			exe, root, ok := runscOf(proc, 42)
			if ok != (tc.wantRoot != "") || root != tc.wantRoot {
				t.Fatalf("runscOf = %q, %q, %v; want root %q", exe, root, ok, tc.wantRoot)
			}
			if ok && exe != filepath.Join(proc, "42", "exe") {
				t.Errorf("exe = %q, want the process's own executable", exe)
			}
		})
	}
	if _, _, ok := runscOf(t.TempDir(), 42); ok {
		t.Error("a process that is not there was taken for a runsc sandbox")
	}
	if _, _, ok := runscOf("/proc", 0); ok {
		t.Error("pid 0 (a container that does not run) was taken for a runsc sandbox")
	}
}

func TestHandOver(t *testing.T) {
	src := t.TempDir()
	for _, f := range []string{"checkpoint.img", "pages.img", "pages_meta.img"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("by reference", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "k")
		if err := handOver(src, dst, []string{ImageRefsArg, "--overlay2=none"}); err != nil {
			t.Fatal(err)
		}
		ents, _ := os.ReadDir(dst)
		if len(ents) != 1 || ents[0].Name() != imageRefFile {
			t.Fatalf("checkpoint directory holds %v, want only %s", ents, imageRefFile)
		}
		if b, _ := os.ReadFile(filepath.Join(dst, imageRefFile)); string(b) != src {
			t.Errorf("%s = %q, want %q", imageRefFile, b, src)
		}
	})
	t.Run("linked", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "k")
		if err := handOver(src, dst, []string{"--overlay2=none"}); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"checkpoint.img", "pages.img", "pages_meta.img"} {
			if b, err := os.ReadFile(filepath.Join(dst, f)); err != nil || string(b) != f {
				t.Errorf("%s = %q, %v; want the image's file", f, b, err)
			}
		}
		if _, err := os.Stat(filepath.Join(dst, imageRefFile)); err == nil {
			t.Errorf("an engine that cannot restore by reference was handed a %s", imageRefFile)
		}
	})
}

// TestRunscWrapper runs RunscWrapper in front of a runsc that prints its
// arguments: a restore whose image directory refers to another is given
// that one, and everything else passes unchanged.
func TestRunscWrapper(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "run sc")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	body, err := RunscWrapper(fake)
	if err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "runsc-warren")
	if err := os.WriteFile(wrapper, body, 0o755); err != nil {
		t.Fatal(err)
	}
	ref, image := filepath.Join(dir, "ref"), filepath.Join(dir, "the image")
	if err := os.MkdirAll(ref, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ref, imageRefFile), []byte(image), 0o600); err != nil {
		t.Fatal(err)
	}
	// containerd's own copy of a reference, which it leaves behind.
	copied := filepath.Join(dir, "ctrd-checkpoint123")
	if err := os.MkdirAll(copied, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(copied, imageRefFile), []byte(image), 0o600); err != nil {
		t.Fatal(err)
	}
	plain := t.TempDir()
	if _, err := RunscWrapper("/it's/runsc"); err == nil {
		t.Error("a path the script cannot quote was taken")
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"restore by reference", []string{ImageRefsArg, "--overlay2=none", "--root", "/r", "restore", "--image-path", ref, "--work-path", "/w", "c1"},
			[]string{"--overlay2=none", "--root", "/r", "restore", "--image-path", image, "--work-path", "/w", "c1"}},
		{"restore by reference, one argument", []string{ImageRefsArg, "restore", "--image-path=" + ref, "c1"},
			[]string{"restore", "--image-path=" + image, "c1"}},
		{"restore by reference from containerd's copy", []string{ImageRefsArg, "restore", "--image-path", copied, "c1"},
			[]string{"restore", "--image-path", image, "c1"}},
		{"restore of a plain checkpoint", []string{ImageRefsArg, "restore", "--image-path", plain, "c1"},
			[]string{"restore", "--image-path", plain, "c1"}},
		{"another command", []string{ImageRefsArg, "--root", "/r", "state", "c 1"},
			[]string{"--root", "/r", "state", "c 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(wrapper, tc.args...).CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); !slices.Equal(got, tc.want) {
				t.Errorf("runsc got %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := os.Stat(copied); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("containerd's copy of a reference is left: %v", err)
	}
	for _, d := range []string{ref, plain} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("a checkpoint of Warren's own was removed: %v", err)
		}
	}
}
