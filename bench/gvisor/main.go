// Command gvisor compares sandboxes under runc and gVisor on one Docker
// engine, and measures pause to disk (checkpoint and restore) under gVisor,
// in one run:
//
//   - create → first command: Manager.Create (no warm pool), then
//     `/bin/bash -l -c true` through the agent (what the SDK's
//     commands.run('true') sends); and the exec round trip of that command
//     once the sandbox runs (p50/p95 of -rt runs);
//   - for an idle sandbox and one whose process holds -hold-mb of random
//     bytes: checkpoint time (Manager.Stop), checkpoint size on disk,
//     restore time (Manager.Connect) and restore → first command, checking
//     that the holding process survived with its memory;
//   - the RAM held by -paused sandboxes paused in each mode (runc frozen
//     and stopped, gVisor frozen and checkpointed), each running a process
//     that holds -paused-mb: see paused.go.
//
// A part whose count (-n, -cp, -paused) is 0 is skipped.
//
// The engine must know runsc (under -gvisor-name) and be in experimental
// mode: scripts/setup-gvisor.sh start makes such an engine beside the main
// one, and this program then runs with
//
//	DOCKER_HOST=unix:///run/warren-gvisor/docker.sock go run ./bench/gvisor
//
// It reads checkpoint sizes from the engine's data root and memory use from
// the containers' cgroups, so it runs as root on the engine's host. Every
// container it made is removed at the end.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/agentclient"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench/gvisor:", err)
		os.Exit(1)
	}
}

type bench struct {
	ac       *agentclient.Client
	cli      *client.Client // the engine, for what the runtime does not expose
	dataRoot string
	// One manager per runtime, each with a runtime of its own label so
	// that neither reconciles the other's containers away.
	ms  map[sandbox.OCIRuntime]*lifecycle.Manager
	rts map[sandbox.OCIRuntime]*docker.Runtime
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gvisor", flag.ContinueOnError)
	n := fs.Int("n", 10, "creates per runtime")
	rtN := fs.Int("rt", 50, "exec round trips per runtime")
	cpN := fs.Int("cp", 5, "checkpoint/restore cycles per case")
	holdMB := fs.Int("hold-mb", 500, "memory the second checkpoint case holds, in MiB")
	pausedN := fs.Int("paused", 50, "sandboxes paused per mode in the paused-RAM measurement")
	pausedMB := fs.Int("paused-mb", 20, "memory each paused sandbox's process holds, in MiB")
	pausedCheck := fs.Int("paused-check", 5, "paused sandboxes per mode resumed to check their process")
	pausedModes := fs.String("paused-modes", "all", "pause modes of the paused-RAM measurement: all, or some of runc-frozen,runc-stopped,gvisor-frozen,gvisor-checkpointed")
	par := fs.Int("par", 4, "sandboxes created, paused or removed at once in the paused-RAM measurement")
	agent := fs.String("agent", "bin/warren-agent", "the warren-agent binary")
	image := fs.String("image", sandbox.BaseImage, "sandbox image")
	network := fs.String("network", "wgvbench", "Docker network of the sandboxes")
	gvName := fs.String("gvisor-name", docker.DefaultGVisorRuntime, "the engine's name of runsc")
	if err := fs.Parse(args); err != nil {
		return err
	}
	modes, err := selectModes(*pausedModes)
	if err != nil {
		return err
	}
	agentPath, err := filepath.Abs(*agent)
	if err != nil {
		return err
	}
	b := make([]byte, 4)
	rand.Read(b)
	label := "bench-gvisor-" + hex.EncodeToString(b)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cli, err := docker.Connect()
	if err != nil {
		return err
	}
	defer cli.Close()
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return err
	}
	bn := &bench{ac: agentclient.New(), cli: cli,
		ms: map[sandbox.OCIRuntime]*lifecycle.Manager{}, rts: map[sandbox.OCIRuntime]*docker.Runtime{}}
	dir, err := os.MkdirTemp("", "bench-gvisor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, r := range []sandbox.OCIRuntime{sandbox.RuntimeRunc, sandbox.RuntimeGVisor} {
		rt, err := docker.New(docker.Config{AgentPath: agentPath, Network: *network, Instance: label + "-" + string(r),
			GVisorRuntime: *gvName, Logger: log})
		if err != nil {
			return err
		}
		defer rt.Close()
		if err := rt.CheckRuntime(ctx, r); err != nil {
			return err
		}
		// As warren serve does: concurrent first creates would race to
		// make the network.
		if _, err := rt.EnsureNetwork(ctx); err != nil {
			return err
		}
		defer func() {
			ctx := context.WithoutCancel(ctx)
			list, _ := rt.List(ctx)
			for _, c := range list {
				rt.Remove(ctx, c.ID)
			}
		}()
		bn.rts[r] = rt
		st, err := sqlite.Open(ctx, filepath.Join(dir, string(r)+".db"))
		if err != nil {
			return err
		}
		defer st.Close()
		set := lifecycle.DefaultSettings()
		set.WarmPool, set.WarmPoolCodeInterpreter = 0, 0
		set.BaseImage, set.SandboxRuntime, set.FreezeMaxAge, set.MaxFrozen = *image, r, -1, -1
		set.MemoryMB = max(*holdMB, *pausedMB) + 512
		m, err := lifecycle.New(lifecycle.Deps{Runtime: rt, Agent: bn.ac, Store: st, Logger: log}, set)
		if err != nil {
			return err
		}
		if err := m.Start(ctx); err != nil {
			return err
		}
		defer m.Close()
		bn.ms[r] = m
	}
	if bn.dataRoot, err = bn.rts[sandbox.RuntimeGVisor].DataRoot(ctx); err != nil {
		return err
	}
	fmt.Printf("engine %s, image %s, %d creates and %d round trips per runtime, %d checkpoint cycles per case, %d paused sandboxes per mode\n",
		info.Info.ServerVersion, *image, *n, *rtN, *cpN, *pausedN)

	if *n > 0 {
		fmt.Printf("\n%-8s %-28s %-28s %s\n", "runtime", "create → first cmd p50/p95", "first cmd alone p50", "exec round trip p50/p95")
		for _, r := range []sandbox.OCIRuntime{sandbox.RuntimeRunc, sandbox.RuntimeGVisor} {
			if err := bn.createAndExec(ctx, r, *n, *rtN); err != nil {
				return fmt.Errorf("%s: %w", r, err)
			}
		}
	}
	if *cpN > 0 {
		fmt.Printf("\n%-22s %-16s %-16s %-16s %s\n", "gvisor checkpoint of", "checkpoint p50", "size", "restore p50", "restore → first cmd p50")
		if err := bn.checkpoints(ctx, "an idle sandbox", 0, *cpN); err != nil {
			return err
		}
		if err := bn.checkpoints(ctx, fmt.Sprintf("%d MiB held", *holdMB), *holdMB, *cpN); err != nil {
			return err
		}
	}
	if *pausedN > 0 {
		return bn.paused(ctx, pausedRun{modes: modes, n: *pausedN, holdMB: *pausedMB, check: min(*pausedCheck, *pausedN), par: max(1, *par)})
	}
	return nil
}

func (b *bench) cmd(ctx context.Context, sb sandbox.Sandbox, c string) (string, error) {
	code, out, err := b.ac.RunCommand(ctx, sb.AgentAddr, sb.EnvdAccessToken, "user", "", c, nil)
	if err == nil && code != 0 {
		err = fmt.Errorf("%q exited %d: %s", c, code, out)
	}
	return strings.TrimSpace(out), err
}

func (b *bench) createAndExec(ctx context.Context, r sandbox.OCIRuntime, n, rtN int) error {
	m := b.ms[r]
	var create, first, trips []time.Duration
	for i := range n {
		start := time.Now()
		sb, err := m.Create(ctx, lifecycle.CreateRequest{TeamID: sandbox.DefaultTeamID, Timeout: 10 * time.Minute})
		if err != nil {
			return err
		}
		ready := time.Now()
		if _, err := b.cmd(ctx, sb, "true"); err != nil {
			return err
		}
		create = append(create, time.Since(start))
		first = append(first, time.Since(ready))
		if i == 0 {
			for range rtN {
				t := time.Now()
				if _, err := b.cmd(ctx, sb, "true"); err != nil {
					return err
				}
				trips = append(trips, time.Since(t))
			}
		}
		if err := m.Kill(ctx, sandbox.DefaultTeamID, sb.ID); err != nil {
			return err
		}
	}
	fmt.Printf("%-8s %-28s %-28s %s\n", r, pct(create, 50)+" / "+pct(create, 95), pct(first, 50), pct(trips, 50)+" / "+pct(trips, 95))
	return nil
}

// holder keeps holdMB MiB of random bytes in memory and prints a digest
// of them on demand, through a file.
const holder = `nohup python3 -c '
import hashlib, os, signal, time
b = bytearray(%d << 20)
for i in range(0, len(b), 1 << 20): b[i:i + (1 << 20)] = os.urandom(1 << 20)
def dump(*_):
    open("/tmp/digest", "w").write(hashlib.sha256(b).hexdigest())
signal.signal(signal.SIGUSR1, dump)
dump()
while True: time.sleep(3600)
' >/dev/null 2>&1 &
for i in $(seq 600); do [ -s /tmp/digest ] && break; sleep 0.1; done; cat /tmp/digest`

// askDigest has the holder write its digest again, and prints it.
const askDigest = "rm -f /tmp/digest; pkill -USR1 -f '[h]ashlib'; for i in $(seq 500); do [ -s /tmp/digest ] && break; sleep 0.01; done; cat /tmp/digest"

func (b *bench) checkpoints(ctx context.Context, name string, holdMB, cycles int) error {
	m := b.ms[sandbox.RuntimeGVisor]
	sb, err := m.Create(ctx, lifecycle.CreateRequest{TeamID: sandbox.DefaultTeamID, Timeout: 10 * time.Minute})
	if err != nil {
		return err
	}
	defer m.Kill(context.WithoutCancel(ctx), sandbox.DefaultTeamID, sb.ID)
	digest, err := b.cmd(ctx, sb, fmt.Sprintf(holder, holdMB))
	if err != nil {
		return err
	}
	var cp, restore, first []time.Duration
	var size int64
	for range cycles {
		start := time.Now()
		mode, err := m.Stop(ctx, sandbox.DefaultTeamID, sb.ID)
		if err != nil {
			return err
		}
		if mode != sandbox.PauseCheckpointed {
			return fmt.Errorf("stop paused the sandbox %s, not checkpointed", mode)
		}
		cp = append(cp, time.Since(start))
		size, err = docker.CheckpointSize(b.dataRoot, sb.ContainerID)
		if err != nil {
			return err
		}
		if c, err := b.rts[sandbox.RuntimeGVisor].Inspect(ctx, sb.ContainerID); err != nil || c.Running {
			return errors.Join(err, errors.New("a checkpointed container still runs"))
		}
		start = time.Now()
		sb, _, err = m.Connect(ctx, sandbox.DefaultTeamID, sb.ID, 10*time.Minute, true)
		if err != nil {
			return err
		}
		restored := time.Now()
		restore = append(restore, restored.Sub(start))
		got, err := b.cmd(ctx, sb, askDigest)
		if err != nil {
			return err
		}
		first = append(first, time.Since(restored))
		if got != digest {
			return fmt.Errorf("after restore the holder reports %q, want %q: memory not kept", got, digest)
		}
	}
	fmt.Printf("%-22s %-16s %-16s %-16s %s\n", name, pct(cp, 50), fmt.Sprintf("%.1f MiB", float64(size)/(1<<20)), pct(restore, 50), pct(first, 50))
	return nil
}

// pct returns the p-th percentile of ds, rounded for printing.
func pct(ds []time.Duration, p int) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	d := s[min(len(s)-1, (len(s)*p+99)/100-1)]
	if d >= 100*time.Millisecond {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(10 * time.Microsecond).String()
}
