package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/runtime/docker"
)

const runtimeUsage = `Usage: warren runtime setup gvisor [flags]

Set up gVisor for warren serve --runtime=gvisor: build runsc from its Go module
(gvisor.dev/gvisor/runsc, which needs the go command) or install a given binary,
then register it in the Docker engine's daemon.json with experimental mode on
(needed for checkpoints), keeping what the file already says. The engine runs
it through a small wrapper installed beside it (runsc-warren), which restores
forks and memory snapshots from their images in place. The engine reads
daemon.json only when it starts: restart it yourself, or pass --restart-engine.
Run it as root on the engine's host; afterwards, warren doctor --runtime=gvisor
checks the result.`

// runscArgs are the runtime arguments Warren registers runsc with:
// --overlay2=none keeps the container's writes in the engine's own layer,
// as under runc, so that snapshots (docker commit) and stopped sandboxes
// keep them (gVisor's default keeps them inside the sandbox); --allow-suid
// honours set-user-ID binaries, which sudo inside sandboxes needs (gVisor
// ignores them by default).
var runscArgs = []string{"--overlay2=none", "--allow-suid"}

func (m *Main) runRuntime(ctx context.Context, args []string) error {
	if len(args) < 2 || args[0] != "setup" || args[1] != "gvisor" {
		fmt.Fprintln(m.Stderr, runtimeUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return nil
		}
		return usageError{"runtime takes: setup gvisor"}
	}
	fs := m.newFlagSet("runtime setup gvisor", "warren runtime setup gvisor [flags]", runtimeUsage)
	runsc := fs.String("runsc", "/usr/local/lib/warren/runsc", "where runsc is installed")
	from := fs.String("from", "", "install this runsc binary instead of building one")
	version := fs.String("version", "latest", "module version of gvisor.dev/gvisor to build (latest: the newest of its go branch)")
	rebuild := fs.Bool("rebuild", false, "build runsc even when --runsc already exists")
	daemonJSON := fs.String("daemon-json", "/etc/docker/daemon.json", "the engine's configuration file")
	name := fs.String("name", docker.DefaultGVisorRuntime, "the runtime's name in daemon.json (serve's --gvisor-runtime-name)")
	restart := fs.Bool("restart-engine", false, "restart the Docker engine (systemctl or service) so it reads daemon.json; running containers stop unless the engine has live-restore")
	if err := parseFlags(fs, args[2:]); err != nil {
		return err
	}
	if err := m.installRunsc(ctx, *runsc, *from, *version, *rebuild); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, *runsc, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %v\n%s", *runsc, err, out)
	}
	fmt.Fprintf(m.Stdout, "runsc: %s (%s)\n", *runsc, firstLine(string(out)))

	old, err := os.ReadFile(*daemonJSON)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	wrapper, err := installWrapper(*runsc)
	if err != nil {
		return err
	}
	merged, changed, err := mergeDaemonConfig(old, *name, wrapper, append([]string{docker.ImageRefsArg}, runscArgs...))
	if err != nil {
		return fmt.Errorf("%s: %w", *daemonJSON, err)
	}
	if changed {
		if err := writeDaemonConfig(*daemonJSON, old, merged); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "%s: runtime %q registered, experimental mode on\n", *daemonJSON, *name)
	} else {
		fmt.Fprintf(m.Stdout, "%s already registers runtime %q with experimental mode on\n", *daemonJSON, *name)
	}
	if !*restart {
		if changed {
			fmt.Fprintln(m.Stdout, "Restart the Docker engine so it reads it (e.g. systemctl restart docker), or rerun with --restart-engine;")
		}
		fmt.Fprintln(m.Stdout, "then check with: warren doctor --runtime=gvisor, and serve with: warren serve --runtime=gvisor")
		return nil
	}
	return m.restartEngine(ctx)
}

// installWrapper installs the runtime the engine runs, runsc behind
// docker.RunscWrapper (which restores memory images in place, instead of
// through the engine's tar of them), beside runsc as runsc-warren, and
// returns its path.
func installWrapper(runsc string) (string, error) {
	body, err := docker.RunscWrapper(runsc)
	if err != nil {
		return "", err
	}
	path := runsc + "-warren"
	tmp, err := os.CreateTemp(filepath.Dir(path), ".runsc-warren-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(body); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return path, os.Rename(tmp.Name(), path)
}

// installRunsc puts runsc at dst: a copy of from, or a fresh build.
func (m *Main) installRunsc(ctx context.Context, dst, from, version string, rebuild bool) error {
	if from == "" && !rebuild {
		if fi, err := os.Stat(dst); err == nil && fi.Mode()&0o111 != 0 {
			fmt.Fprintf(m.Stdout, "runsc already installed at %s (--rebuild builds it again)\n", dst)
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if from != "" {
		return copyExecutable(from, dst)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return errors.New("building runsc needs the go command (Go 1.26 or newer); install Go, or pass --from with a runsc binary")
	}
	tmp, err := os.MkdirTemp("", "warren-runsc-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(m.Stdout, "building gvisor.dev/gvisor/runsc@%s (a few minutes)...\n", version)
	start := time.Now()
	cmd := exec.CommandContext(ctx, goBin, "install", "gvisor.dev/gvisor/runsc@"+version)
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = m.Stderr, m.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building runsc: %w", err)
	}
	fmt.Fprintf(m.Stdout, "built runsc in %v\n", time.Since(start).Round(time.Second))
	return copyExecutable(filepath.Join(tmp, "runsc"), dst)
}

// copyExecutable copies src to dst (mode 0755) through a temporary file,
// so that a running runsc is never overwritten in place.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(dst), ".runsc-*")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(0o755); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(out.Name(), dst)
}

// mergeDaemonConfig returns the daemon.json old (empty: none) with the
// runtime name pointing at path with args and experimental mode on; every
// other setting is kept. changed is false when old already says so.
func mergeDaemonConfig(old []byte, name, path string, args []string) (_ []byte, changed bool, _ error) {
	cfg := map[string]any{}
	if len(bytes.TrimSpace(old)) > 0 {
		if err := json.Unmarshal(old, &cfg); err != nil {
			return nil, false, fmt.Errorf("not valid JSON, left as it is: %w", err)
		}
	}
	runtimes, ok := cfg["runtimes"].(map[string]any)
	if !ok {
		if cfg["runtimes"] != nil {
			return nil, false, errors.New(`"runtimes" is not an object, left as it is`)
		}
		runtimes = map[string]any{}
	}
	entry := map[string]any{"path": path}
	if len(args) > 0 {
		a := make([]any, len(args))
		for i, s := range args {
			a[i] = s
		}
		entry["runtimeArgs"] = a
	}
	before, _ := json.Marshal(cfg)
	runtimes[name] = entry
	cfg["runtimes"] = runtimes
	cfg["experimental"] = true
	after, _ := json.Marshal(cfg)
	if bytes.Equal(before, after) {
		return old, false, nil
	}
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, false, err
	}
	return append(out, '\n'), true, nil
}

// writeDaemonConfig replaces path with data, keeping the old content in
// path.warren-backup.
func writeDaemonConfig(path string, old, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if len(old) > 0 {
		if err := os.WriteFile(path+".warren-backup", old, 0o644); err != nil {
			return err
		}
	}
	tmp := path + ".warren-tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// restartEngine restarts the Docker engine with the host's service manager.
func (m *Main) restartEngine(ctx context.Context) error {
	var cmd *exec.Cmd
	if _, err := exec.LookPath("systemctl"); err == nil && isSystemd() {
		cmd = exec.CommandContext(ctx, "systemctl", "restart", "docker")
	} else if _, err := exec.LookPath("service"); err == nil {
		cmd = exec.CommandContext(ctx, "service", "docker", "restart")
	} else {
		return errors.New("found neither systemctl nor service: restart the Docker engine yourself")
	}
	fmt.Fprintf(m.Stdout, "restarting the engine: %s\n", strings.Join(cmd.Args, " "))
	cmd.Stdout, cmd.Stderr = m.Stderr, m.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("restarting the engine: %w", err)
	}
	fmt.Fprintln(m.Stdout, "engine restarted; check with: warren doctor --runtime=gvisor")
	return nil
}

func isSystemd() bool {
	_, err := os.Stat("/run/systemd/system")
	return err == nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
