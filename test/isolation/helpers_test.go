package isolation

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/firewall"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

const team = sandbox.DefaultTeamID

// Limits every test sandbox gets; small so that hogs hit them fast.
const (
	testPids     = 96
	testMemoryMB = 96
)

// env is a lifecycle manager on the real engine with the iptables
// firewall, on a bridge network of its own that it removes at the end, so
// tests never touch a running server's network or rules. Its sandboxes
// run under the target's runtime.
type env struct {
	target
	cli     *client.Client
	rt      *docker.Runtime
	fw      *firewall.Firewall
	m       *lifecycle.Manager
	bridge  string
	gateway netip.Addr
	probe   string // host path of the probe binary
	image   string // the sandboxes' image
	// buildNet is the template builds' network, which the firewall covers.
	buildNet string

	mu        sync.Mutex // guards sandboxes
	sandboxes []struct{ team, id string }
}

// newEnv sets up an env on the target the environment names (see
// targetFromEnv) or skips the test, saying why.
func newEnv(t *testing.T) *env {
	t.Helper()
	tg := targetFromEnv(t)
	if tg.host != "" {
		t.Setenv("DOCKER_HOST", tg.host) // for the runtime, which reads it too
	}
	cli, err := docker.Connect()
	if err == nil {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
		cancel()
	}
	switch {
	case err != nil && tg.explicit:
		t.Fatalf("%s=%s, but no Docker engine answers at DOCKER_HOST=%q: %v", runtimeEnv, tg.runtime, os.Getenv("DOCKER_HOST"), err)
	case err != nil:
		t.Skipf("skipping: no Docker engine reachable (set DOCKER_HOST or start dockerd): %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	if os.Geteuid() != 0 {
		t.Skip("skipping: the isolation tests install iptables rules and need root (CI runs them as root)")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("skipping: iptables is not installed (apt-get install iptables)")
	}
	e := &env{cli: cli, target: tg}
	dir := t.TempDir()
	agent := buildStatic(t, dir, "fakeagent", "../../internal/runtime/docker/testdata/fakeagent")
	e.probe = buildStatic(t, dir, "probe", "./testdata/probe")

	name := tg.networkName()
	e.rt, err = docker.New(docker.Config{AgentPath: agent, Network: name, Instance: "test-" + name, StopTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.rt.Close() })
	ctx := t.Context()
	if err := e.rt.CheckRuntime(ctx, tg.runtime); err != nil {
		t.Fatalf("%s=%s on %q: %v", runtimeEnv, tg.runtime, os.Getenv("DOCKER_HOST"), err)
	}
	e.bridge, err = e.rt.EnsureNetwork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.NetworkRemove(context.Background(), name, client.NetworkRemoveOptions{}) })
	allowWithinBridge(t, e.bridge)
	net, err := cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if err != nil || len(net.Network.IPAM.Config) == 0 {
		t.Fatalf("inspect the test network: %v", err)
	}
	e.gateway = net.Network.IPAM.Config[0].Gateway

	var buildBridge string
	e.buildNet, buildBridge, err = e.rt.EnsureBuildNetwork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.NetworkRemove(context.Background(), e.buildNet, client.NetworkRemoveOptions{}) })
	e.fw, err = firewall.New(ctx, firewall.Config{Bridge: e.bridge, BuildBridge: buildBridge})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.fw.Uninstall(context.Background()); err != nil {
			t.Errorf("removing the test's iptables rules: %v", err)
		}
		e.fw.Close()
	})

	e.image = "warren/base"
	if ok, _ := e.rt.ImageExists(ctx, e.image); !ok {
		e.image = importImage(t, cli)
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	set := lifecycle.DefaultSettings()
	set.WarmPool, set.WarmPoolCodeInterpreter = 0, 0
	set.SandboxRuntime, set.BaseImage, set.CPUCount, set.MemoryMB, set.PidsLimit = tg.runtime, e.image, 1, testMemoryMB, testPids
	set.ReconcileInterval = time.Hour // the tests reconcile when they mean to
	e.m, err = lifecycle.New(lifecycle.Deps{Runtime: e.rt, Agent: healthAgent{}, Store: st, Firewall: e.fw}, set)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, sb := range e.sandboxes {
			e.m.Kill(context.Background(), sb.team, sb.id)
		}
		e.m.Close()
	})
	return e
}

// box is a test sandbox with the probe in it.
type box struct {
	sandbox.Sandbox
	IP netip.Addr
}

// create makes a sandbox of team with network settings n and copies the
// probe in.
func (e *env) create(t *testing.T, n sandbox.Network) box {
	t.Helper()
	return e.createIn(t, team, n)
}

// createIn is create for a sandbox of teamID.
func (e *env) createIn(t *testing.T, teamID string, n sandbox.Network) box {
	t.Helper()
	ctx := t.Context()
	sb, err := e.m.Create(ctx, lifecycle.CreateRequest{TeamID: teamID, Template: lifecycle.BaseTemplate, Timeout: 10 * time.Minute, Network: n})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	e.mu.Lock()
	e.sandboxes = append(e.sandboxes, struct{ team, id string }{teamID, sb.ID})
	e.mu.Unlock()
	e.copyProbe(t, sb.ContainerID)
	return box{Sandbox: sb, IP: e.ip(t, sb.ContainerID)}
}

func (e *env) ip(t *testing.T, containerID string) netip.Addr {
	t.Helper()
	c, err := e.rt.Inspect(t.Context(), containerID)
	if err != nil || !c.IP.IsValid() {
		t.Fatalf("the sandbox has no address: %+v, %v", c, err)
	}
	return c.IP
}

// open is E2B's default network: everything allowed but other sandboxes;
// allowOut, when given, names those it may reach.
func open(allowOut ...string) sandbox.Network {
	return sandbox.Network{AllowPublicTraffic: true, AllowInternetAccess: true, AllowOut: allowOut}
}

func (e *env) copyProbe(t *testing.T, containerID string) {
	t.Helper()
	bin, err := os.ReadFile(e.probe)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "probe", Mode: 0o755, Size: int64(len(bin)), ModTime: time.Now()})
	tw.Write(bin)
	tw.Close()
	if _, err := e.cli.CopyToContainer(t.Context(), containerID, client.CopyToContainerOptions{DestinationPath: "/", Content: &buf}); err != nil {
		t.Fatalf("copy the probe in: %v", err)
	}
}

// run runs the probe in a sandbox as root and returns its output and
// exit code; -1 when the sandbox's container stopped under it.
func (e *env) run(t *testing.T, b box, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ex, err := e.cli.ExecCreate(ctx, b.ContainerID, client.ExecCreateOptions{
		AttachStdout: true, AttachStderr: true, Cmd: append([]string{"/probe"}, args...),
	})
	if err != nil {
		t.Fatalf("exec %v: %v", args, err)
	}
	att, err := e.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec %v: %v", args, err)
	}
	defer att.Close()
	// The engine may never end the output of an exec whose container
	// died (it does not when gVisor's Sentry is OOM-killed): end it when
	// the container stops, or at the deadline.
	var stopped atomic.Bool
	wait := e.cli.ContainerWait(ctx, b.ContainerID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	go func() {
		select {
		case <-wait.Result:
			stopped.Store(true)
		case <-wait.Error:
		}
		att.Close()
	}()
	var out bytes.Buffer
	_, err = stdcopy.StdCopy(&out, &out, att.Reader)
	switch {
	case stopped.Load():
		return strings.TrimSpace(out.String()), -1
	case err != nil && !errors.Is(err, io.EOF):
		t.Fatalf("exec %v: reading output: %v", args, err)
	}
	res, err := e.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		t.Fatalf("exec %v: %v", args, err)
	}
	return strings.TrimSpace(out.String()), res.ExitCode
}

// dial tries a TCP connection from inside b: "ok", "refused", "timeout"
// or an error.
func (e *env) dial(t *testing.T, b box, addr string) string {
	t.Helper()
	out, _ := e.run(t, b, "dial", addr)
	return out
}

// allowedName is the domain the tests allow sandboxes by name. Nothing
// resolves it: a sandbox naming it in a request to an address it did not
// resolve it to is what the egress server must refuse.
const allowedName = "example.com"

// reaches reports whether b gets the greeting of a server that serve
// started at addr, naming allowedName in its request: a completed TCP
// handshake is not enough, since a sandbox with domain rules has its
// refused connections taken by the egress server, which then resets
// them.
func (e *env) reaches(t *testing.T, b box, addr string) (bool, string) {
	t.Helper()
	out, _ := e.run(t, b, "greet", addr, allowedName)
	return out == "hello", out
}

// serve starts a TCP server on port in b and waits until the host can
// reach it (the host reaches container addresses; only sandboxes are
// filtered).
func (e *env) serve(t *testing.T, b box, port string) string {
	t.Helper()
	ctx := t.Context()
	ex, err := e.cli.ExecCreate(ctx, b.ContainerID, client.ExecCreateOptions{Cmd: []string{"/probe", "serve", port}})
	if err == nil {
		_, err = e.cli.ExecStart(ctx, ex.ID, client.ExecStartOptions{Detach: true})
	}
	if err != nil {
		t.Fatalf("start a server in the sandbox: %v", err)
	}
	addr := net.JoinHostPort(b.IP.String(), port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox's server never answered the host: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// healthy reports whether a sandbox's agent answers on its published port.
func healthy(addr string) bool {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + addr + "/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusNoContent
}

// healthAgent stands in for the agent client: the fake agent needs no
// init, only to answer.
type healthAgent struct{}

func (a healthAgent) Init(ctx context.Context, addr string, _ sandbox.AgentInit) error {
	return a.WaitReady(ctx, addr)
}

func (healthAgent) WaitReady(ctx context.Context, addr string) error {
	for !healthy(addr) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

func buildStatic(t *testing.T, dir, name, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	cmd := exec.Command(filepath.Join(goruntime.GOROOT(), "bin", "go"), "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, b)
	}
	return out
}

// importImage imports an image of two empty directories, for hosts
// without warren/base; the agent and the probe come from outside.
func importImage(t *testing.T, cli *client.Client) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"etc/", "tmp/"} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: time.Now()})
	}
	tw.Close()
	ref := "warren-test-" + randomHex(6) + ":latest"
	res, err := cli.ImageImport(t.Context(), client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{})
	if err != nil {
		t.Fatalf("importing the test image: %v", err)
	}
	io.Copy(io.Discard, res)
	res.Close()
	t.Cleanup(func() { cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true}) })
	return ref
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
