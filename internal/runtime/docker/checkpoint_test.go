package docker

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

func TestContainerRuntimeName(t *testing.T) {
	r := &Runtime{cfg: Config{GVisorRuntime: "gvisor-test"}}
	for _, tc := range []struct {
		rt   sandbox.OCIRuntime
		want string
	}{
		{"", ""},
		{sandbox.RuntimeRunc, ""},
		{sandbox.RuntimeGVisor, "gvisor-test"},
	} {
		_, host := r.containerConfig(sandbox.ContainerSpec{SandboxID: "s", Image: "i", Runtime: tc.rt})
		if host.Runtime != tc.want {
			t.Errorf("runtime %q: HostConfig.Runtime = %q, want %q", tc.rt, host.Runtime, tc.want)
		}
	}
}

func TestCheckpointDiskUsage(t *testing.T) {
	root := t.TempDir()
	write := func(rel string, n int) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("containers/a/checkpoints/warren/pages.img", 1000)
	write("containers/a/checkpoints/warren/checkpoint.img", 24)
	write("containers/b/checkpoints/warren/pages.img", 100)
	write("containers/c/config.v2.json", 5000) // not a checkpoint
	size, n, err := CheckpointDiskUsage(root)
	if err != nil || size != 1124 || n != 2 {
		t.Errorf("CheckpointDiskUsage = %d bytes in %d, %v; want 1124 in 2", size, n, err)
	}
	if size, n, err := CheckpointDiskUsage(filepath.Join(root, "none")); err != nil || size != 0 || n != 0 {
		t.Errorf("without containers: %d, %d, %v", size, n, err)
	}
	if size, err := CheckpointSize(root, "a"); err != nil || size != 1024 {
		t.Errorf("CheckpointSize(a) = %d, %v; want 1024", size, err)
	}
	if size, err := CheckpointSize(root, "c"); err == nil {
		t.Errorf("CheckpointSize of a container without checkpoints = %d, nil; want an error", size)
	}
}

func TestCloseRemovesOnlyAnEmptyMemoryDir(t *testing.T) {
	root := t.TempDir()
	cli, err := client.New(client.WithHost("unix:///nonexistent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	empty := &Runtime{cfg: Config{Instance: "once"}, cli: cli, dataRoot: root, stop: func() {}}
	kept := &Runtime{cfg: Config{Instance: "kept"}, cli: cli, dataRoot: root, stop: func() {}}
	if err := os.MkdirAll(empty.memoryDirIn(root), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(kept.memoryDirIn(root), "snap"), 0o700); err != nil {
		t.Fatal(err)
	}
	empty.Close()
	kept.Close()
	if _, err := os.Stat(empty.memoryDirIn(root)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("empty memory dir after Close: %v, want it gone", err)
	}
	if _, err := os.Stat(filepath.Join(kept.memoryDirIn(root), "snap")); err != nil {
		t.Errorf("a kept memory image after Close: %v", err)
	}
}
