package docker

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

// runsc at first hand. Docker 20.10 moves every checkpoint through
// containerd as a tar: a checkpoint is written by runsc into a temporary
// directory, tarred into containerd's content store and unpacked again
// by the engine; a restore tars the checkpoint's directory into the store
// and containerd unpacks it for runsc. For a sandbox holding 100 MiB on a
// loaded two-core host that is 10 s to checkpoint and 9 s to restore,
// where runsc itself takes 0.1–0.3 s. Memory images and checkpoints are
// files on the engine's host already, so Warren checkpoints with the
// container's own runsc into the image's directory (for a pause to disk,
// the engine's checkpoint directory of the container), and restores by
// reference where the engine's runtime is runsc-warren.sh (RunscWrapper).

// ImageRefsArg is the runtime argument by which the engine's gVisor
// runtime says it is RunscWrapper: it restores a checkpoint directory
// holding an imageRefFile from the directory that file names. It must
// come first in the runtime's arguments.
const (
	ImageRefsArg = "--warren-image-refs"
	imageRefFile = "warren-image"
)

//go:embed runsc-warren.sh
var runscWrapper string

// RunscWrapper returns runsc-warren.sh for the runsc at path: the
// script to register as the engine's gVisor runtime, with ImageRefsArg
// first in its arguments, so that restores of memory images go by
// reference. path must not hold a single quote.
func RunscWrapper(path string) ([]byte, error) {
	if strings.Contains(path, "'") {
		return nil, fmt.Errorf("runsc's path %q holds a single quote", path)
	}
	const line = "\nRUNSC=/usr/local/lib/warren/runsc\n"
	if !strings.Contains(runscWrapper, line) {
		return nil, errors.New("runsc-warren.sh does not set RUNSC")
	}
	return []byte(strings.Replace(runscWrapper, line, "\nRUNSC='"+path+"'\n", 1)), nil
}

// runscOf returns the runsc executable and state root of the gVisor
// sandbox whose process is pid, read from procDir (the host's /proc): the
// engine reports a runsc container's sandbox process (runsc-sandbox
// --root=DIR ... boot) as its own. ok is false when pid is no runsc
// sandbox seen from here: another runtime, or a server in another PID
// namespace than the engine. The executable is /proc/PID/exe, the very
// binary that runs the sandbox even if the file was replaced since.
func runscOf(procDir string, pid int) (exe, root string, ok bool) {
	if pid <= 0 {
		return "", "", false
	}
	dir := filepath.Join(procDir, strconv.Itoa(pid))
	raw, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return "", "", false
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	if filepath.Base(args[0]) != "runsc-sandbox" || !slices.Contains(args, "boot") {
		return "", "", false
	}
	for i, a := range args {
		if a == "boot" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "root" {
			continue
		}
		if !hasVal && i+1 < len(args) {
			val = args[i+1]
		}
		root = val
	}
	exe = filepath.Join(dir, "exe")
	if root == "" {
		return "", "", false
	}
	if _, err := os.Stat(exe); err != nil {
		return "", "", false
	}
	return exe, root, true
}

// checkpointInPlace has the runsc of running container id, whose sandbox
// process is pid, write a checkpoint of it into dst. With leaveRunning the
// container goes on as it was (running or frozen); without, its sandbox
// exits once saved. done is false, with no error, when that runsc cannot
// be reached from here: the caller then goes through the engine.
func checkpointInPlace(ctx context.Context, id string, pid int, dst string, leaveRunning bool) (done bool, err error) {
	exe, root, ok := runscOf("/proc", pid)
	if !ok {
		return false, nil
	}
	args := []string{"--root", root, "checkpoint", "--image-path", dst}
	if leaveRunning {
		args = append(args, "--leave-running")
	}
	out, err := exec.CommandContext(ctx, exe, append(args, id)...).CombinedOutput()
	if err != nil {
		err = fmt.Errorf("runsc checkpoint: %w: %s", err, lastLine(bytes.TrimSpace(out)))
		return true, sandbox.Wrap(sandbox.KindInternal, err, "cannot checkpoint the sandbox's container")
	}
	return true, nil
}

// RestoresInPlace reports whether the engine's gVisor runtime restores
// memory images by reference (it is RunscWrapper, with ImageRefsArg):
// without, resumes from disk, forks and memory snapshots restore through
// the engine's tar.
func (r *Runtime) RestoresInPlace(ctx context.Context) (bool, error) {
	info, err := r.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return false, classify(err, "docker engine unreachable")
	}
	return byReference(info.Info.Runtimes[r.cfg.GVisorRuntime].Args), nil
}

// byReference reports whether a gVisor runtime registered with
// runtimeArgs restores by reference.
func byReference(runtimeArgs []string) bool {
	return slices.Contains(runtimeArgs, ImageRefsArg)
}

func lastLine(b []byte) string {
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return string(b)
}
