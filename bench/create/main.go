// Command create measures how long creating a sandbox takes, with the warm
// pool and without it, in one run on the local Docker engine.
//
// It runs two lifecycle managers side by side, each with its own SQLite
// store and its own container label (so neither sees the other's, nor any
// other Warren's), one with Settings.WarmPool = 0 and one with -pool. Their
// creates alternate, and each waits for the pool to be full and the engine
// quiet, so both see the same machine. Per create it times:
//
//	ready:  Manager.Create returns (container up, agent initialised)
//	first:  then a Process.Start of `/bin/bash -l -c true` (what the SDK's
//	        commands.run('true') sends) over Connect, to its end event
//
// and prints p50/p95/max of each. Every container it made is removed at
// the end.
//
//	go run ./bench/create [-n 30] [-pool 2] [-agent bin/warren-agent] [-image warren/base]
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/agentclient"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
	"github.com/warrenhq/warren/proto/process"
	"github.com/warrenhq/warren/proto/process/processconnect"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench/create:", err)
		os.Exit(1)
	}
}

// mode is one lifecycle manager under test.
type mode struct {
	name  string
	pool  int
	rt    *docker.Runtime
	mgr   *lifecycle.Manager
	st    *sqlite.DB
	ready []time.Duration
	first []time.Duration
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("create", flag.ContinueOnError)
	n := fs.Int("n", 30, "creates per mode")
	poolSize := fs.Int("pool", lifecycle.DefaultWarmPool, "warm pool size of the pooled mode")
	agent := fs.String("agent", "bin/warren-agent", "the warren-agent binary")
	image := fs.String("image", sandbox.BaseImage, "base image; pinned to its current ID for the run")
	verbose := fs.Bool("v", false, "log the managers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	agentPath, err := filepath.Abs(*agent)
	if err != nil {
		return err
	}
	logLevel := slog.LevelWarn
	if *verbose {
		logLevel = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel}))
	dir, err := os.MkdirTemp("", "warren-bench-create-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	ac := agentclient.New()
	var modes []*mode
	defer func() {
		for _, md := range modes {
			md.close(log)
		}
	}()
	for _, spec := range []struct {
		name string
		pool int
	}{{"cold", 0}, {fmt.Sprintf("pool=%d", *poolSize), *poolSize}} {
		md := &mode{name: spec.name, pool: spec.pool}
		modes = append(modes, md)
		if err := md.open(ctx, log, ac, agentPath, *image, filepath.Join(dir, fmt.Sprint(len(modes)))); err != nil {
			return err
		}
	}

	hc := &http.Client{}
	for i := range *n {
		for _, md := range modes {
			if err := md.waitFull(ctx); err != nil {
				return err
			}
			time.Sleep(200 * time.Millisecond) // let the engine settle after a refill
			if err := md.once(ctx, hc); err != nil {
				return fmt.Errorf("%s create %d: %w", md.name, i, err)
			}
		}
	}
	fmt.Printf("%d creates per mode, image %s, %d CPUs per sandbox\n", *n, *image, lifecycle.DefaultSettings().CPUCount)
	fmt.Printf("%-8s  %-26s  %-26s\n", "", "create -> agent ready", "create -> first command")
	fmt.Printf("%-8s  %8s %8s %8s  %8s %8s %8s\n", "mode", "p50", "p95", "max", "p50", "p95", "max")
	for _, md := range modes {
		r, f := stats(md.ready), stats(md.first)
		fmt.Printf("%-8s  %8s %8s %8s  %8s %8s %8s\n", md.name, r[0], r[1], r[2], f[0], f[1], f[2])
	}
	return nil
}

func (md *mode) open(ctx context.Context, log *slog.Logger, ac *agentclient.Client, agentPath, image, dir string) error {
	var err error
	md.rt, err = docker.New(docker.Config{AgentPath: agentPath, Instance: "warren-bench-" + randomHex(), Logger: log})
	if err != nil {
		return err
	}
	if _, err := md.rt.Ping(ctx); err != nil {
		return err
	}
	// Pinned: others may rebuild the image under its name meanwhile.
	imageID, err := md.rt.ImageID(ctx, image)
	if err != nil {
		return fmt.Errorf("image %s: %w", image, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	md.st, err = sqlite.Open(ctx, filepath.Join(dir, "warren.db"))
	if err != nil {
		return err
	}
	set := lifecycle.DefaultSettings()
	set.BaseImage, set.WarmPool, set.WarmPoolCodeInterpreter = imageID, md.pool, 0
	md.mgr, err = lifecycle.New(lifecycle.Deps{Runtime: md.rt, Agent: ac, Store: md.st, Logger: log.With("mode", md.name)}, set)
	if err != nil {
		return err
	}
	return md.mgr.Start(ctx)
}

// waitFull waits until the pool, if any, is full.
func (md *mode) waitFull(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for md.mgr.WarmPoolReady() < md.pool {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: pool not full after a minute", md.name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// once creates a sandbox, runs the first command and kills it.
func (md *mode) once(ctx context.Context, hc *http.Client) error {
	t0 := time.Now()
	sb, err := md.mgr.Create(ctx, lifecycle.CreateRequest{
		TeamID: sandbox.DefaultTeamID, Template: lifecycle.BaseTemplate, Timeout: 5 * time.Minute, Secure: true,
	})
	if err != nil {
		return err
	}
	ready := time.Since(t0)
	defer md.mgr.Kill(context.WithoutCancel(ctx), sandbox.DefaultTeamID, sb.ID)
	if err := runTrue(ctx, hc, sb); err != nil {
		return err
	}
	md.ready, md.first = append(md.ready, ready), append(md.first, time.Since(t0))
	return nil
}

// runTrue starts `true` the way the SDK's commands.run does and waits for
// its end event.
func runTrue(ctx context.Context, hc *http.Client, sb sandbox.Sandbox) error {
	cli := processconnect.NewProcessClient(hc, "http://"+sb.AgentAddr)
	stdin := false
	req := connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", "true"}, Envs: map[string]string{}},
		Stdin:   &stdin,
	})
	req.Header().Set("X-Access-Token", sb.EnvdAccessToken)
	req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("user:")))
	stream, err := cli.Start(ctx, req)
	if err != nil {
		return err
	}
	defer stream.Close()
	for stream.Receive() {
		if end := stream.Msg().GetEvent().GetEnd(); end != nil {
			if end.ExitCode != 0 {
				return fmt.Errorf("true exited %d", end.ExitCode)
			}
			return nil
		}
	}
	if err := stream.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return errors.New("process stream ended without an end event")
}

// close stops the manager and removes every container it made, pooled
// ones included (Close keeps those for a restart that will not come).
func (md *mode) close(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if md.mgr != nil {
		md.mgr.Close()
	}
	if md.rt != nil {
		list, err := md.rt.List(ctx)
		if err != nil {
			log.Error("cannot list bench containers", "err", err)
		}
		for _, c := range list {
			if err := md.rt.Remove(ctx, c.ID); err != nil {
				log.Error("cannot remove bench container", "container", c.ID, "err", err)
			}
		}
		md.rt.Close()
	}
	if md.st != nil {
		md.st.Close()
	}
}

// stats returns p50, p95 and max, rounded to 0.1 ms.
func stats(d []time.Duration) [3]time.Duration {
	if len(d) == 0 {
		return [3]time.Duration{}
	}
	s := slices.Sorted(slices.Values(d))
	at := func(q float64) time.Duration {
		return s[min(int(q*float64(len(s))), len(s)-1)].Round(100 * time.Microsecond)
	}
	return [3]time.Duration{at(0.50), at(0.95), s[len(s)-1].Round(100 * time.Microsecond)}
}

func randomHex() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}
