// Package docker is Warren's one adapter to a Docker engine, through its
// HTTP API (github.com/moby/moby/client): Runtime implements
// sandbox.Runtime and its capabilities, Builder builds templates' images,
// and Connect makes the engine connection every other user of the engine
// (the base image builder, warren doctor) shares. Engine errors become
// *sandbox.Error in one place, classify.
//
// It owns the shape of a sandbox's container: the agent binary bind-mounted
// read-only and run as the entrypoint, as root; the agent port published on
// 127.0.0.1 only; labels, resource limits and capabilities. It does not own
// sandbox state (the lifecycle manager does) and never talks to the agent.
package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// AgentMountPath is where the agent binary appears inside every container.
const AgentMountPath = "/.warren/warren-agent"

// DefaultCapabilities returns the capability set a sandbox gets when
// Config.Caps is nil: Docker's default set (enough for sudo, package
// managers, users and file ownership) plus SYS_PTRACE so debuggers and
// strace work, minus NET_RAW: raw sockets would let a sandbox forge
// another's source address, which egress rules match, or spoof ARP on the
// shared bridge (ping still works through ICMP sockets, which the engine
// allows every group). Everything else (SYS_ADMIN, NET_ADMIN, ...) stays
// dropped; the default seccomp and AppArmor profiles stay on.
func DefaultCapabilities() []string {
	return []string{
		"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
		"MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP",
		"SETUID", "SYS_CHROOT", "SYS_PTRACE",
	}
}

// DefaultGVisorRuntime is the engine's name for runsc (its daemon.json
// "runtimes" key) unless told another: the one warren runtime setup
// gvisor gives it.
const DefaultGVisorRuntime = "runsc"

// DefaultNetwork is the Docker network sandboxes join by default.
const DefaultNetwork = "warren0"

// Config configures the runtime. Only AgentPath is required (see Open).
type Config struct {
	// AgentPath is the host path of the static warren-agent binary. Required.
	AgentPath string
	// Network is the Docker network containers join; EnsureNetwork (or
	// the first Create) makes it. Default DefaultNetwork.
	Network string
	// BuildNetwork is the Docker network template builds run on;
	// EnsureBuildNetwork makes it. Default Network + "-build".
	BuildNetwork string
	// Instance names this server among those sharing the engine (serve's
	// --instance): it is the value of sandbox.LabelManaged on the
	// containers this runtime creates, and the only value List returns, so
	// that two servers never adopt each other's containers. Default
	// sandbox.DefaultInstance.
	Instance string
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	// Default 2s; it is rounded down to whole seconds (Docker's unit).
	StopTimeout time.Duration
	// OpenFiles is every container's open-file limit (soft and hard).
	// Default 16384. More than the engine's own limit fails unless the
	// engine may raise limits (CAP_SYS_RESOURCE).
	OpenFiles uint64
	// Caps is the capability set of every container (all others are
	// dropped). Nil means DefaultCapabilities().
	Caps []string
	// GVisorRuntime is the name under which the engine knows runsc (its
	// daemon.json "runtimes" key), used for sandboxes whose spec asks for
	// sandbox.RuntimeGVisor. Default DefaultGVisorRuntime.
	GVisorRuntime string
	// GVisorResolvConf is the host path of a resolv.conf mounted read-only
	// at /etc/resolv.conf in gVisor sandboxes: their network stack cannot
	// reach the engine's embedded DNS (127.0.0.11), which the engine puts
	// in the resolv.conf of containers on its networks. Empty: the
	// engine's, and gVisor sandboxes resolve nothing.
	GVisorResolvConf string
	// Logger receives debug logs; nil = discard.
	Logger *slog.Logger
}

// Runtime is sandbox.Runtime on a Docker engine. It is safe for concurrent
// use.
type Runtime struct {
	cfg Config
	cli *client.Client
	log *slog.Logger

	diskQuotas atomic.Int32 // quotasUnknown or quotasAbsent

	// ctx ends with Close: the watch of images' events (imageIDs) stops.
	ctx    context.Context
	stop   context.CancelFunc
	images imageIDs

	mu        sync.Mutex             // guards samples, ncpu, dataRoot and networkOK
	samples   map[string]statsSample // last stats sample per container ID
	ncpu      int                    // the engine's CPUs; 0 = not asked yet
	dataRoot  string                 // the engine's data root; "" = not asked yet
	networkOK bool                   // EnsureNetwork succeeded once
}

// The Docker engine has every capability (see sandbox.Runtime).
var (
	_ sandbox.Runtime        = (*Runtime)(nil)
	_ sandbox.Freezer        = (*Runtime)(nil)
	_ sandbox.Committer      = (*Runtime)(nil)
	_ sandbox.StatsReader    = (*Runtime)(nil)
	_ sandbox.LogReader      = (*Runtime)(nil)
	_ sandbox.Checkpointer   = (*Runtime)(nil)
	_ sandbox.RuntimeChecker = (*Runtime)(nil)
	_ sandbox.EventWatcher   = (*Runtime)(nil)
	_ sandbox.Pinger         = (*Runtime)(nil)
)

// New connects to the engine named by the DOCKER_* environment (the local
// socket by default). It does not contact the engine; call Ping for that.
func New(cfg Config) (*Runtime, error) {
	if cfg.AgentPath == "" {
		return nil, errors.New("docker runtime: AgentPath is required")
	}
	if _, err := os.Stat(cfg.AgentPath); err != nil {
		return nil, fmt.Errorf("docker runtime: agent binary: %w", err)
	}
	return Open(cfg)
}

// Open connects to the engine as New does, but needs no agent binary: the
// Runtime answers for the engine, its images and its runtimes (Ping,
// ImageExists, CheckRuntime, ProbeRuntime, DataRoot), as warren doctor
// asks them, and refuses to create sandboxes unless cfg has an AgentPath.
// It does not contact the engine.
func Open(cfg Config) (*Runtime, error) {
	if cfg.Network == "" {
		cfg.Network = DefaultNetwork
	}
	if cfg.BuildNetwork == "" {
		cfg.BuildNetwork = cfg.Network + "-build"
	}
	if cfg.OpenFiles == 0 {
		cfg.OpenFiles = 16384
	}
	if cfg.Instance == "" {
		cfg.Instance = sandbox.DefaultInstance
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 2 * time.Second
	}
	if cfg.Caps == nil {
		cfg.Caps = DefaultCapabilities()
	}
	if cfg.GVisorRuntime == "" {
		cfg.GVisorRuntime = DefaultGVisorRuntime
	}
	cli, err := Connect()
	if err != nil {
		return nil, fmt.Errorf("docker runtime: %w", err)
	}
	r := &Runtime{cfg: cfg, cli: cli, log: logkey.For(cfg.Logger, "docker"), samples: map[string]statsSample{}}
	r.ctx, r.stop = context.WithCancel(context.Background())
	return r, nil
}

// Connect returns a connection to the engine named by the DOCKER_*
// environment (the local socket by default), negotiating the API version
// on first use. It does not contact the engine. It is the one place Warren
// makes an engine client.
func Connect() (*client.Client, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("configure the Docker client (check DOCKER_HOST and related variables): %w", err)
	}
	return cli, nil
}

// Close releases the engine connection, the Builders' included, and
// removes this server's memory images' directory if it holds none.
func (r *Runtime) Close() error {
	r.stop()
	r.removeEmptyMemoryDir()
	return r.cli.Close()
}

// Ping checks that the engine answers and returns its API version.
func (r *Runtime) Ping(ctx context.Context) (string, error) {
	res, err := r.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		return "", classify(err, "docker engine unreachable")
	}
	return res.APIVersion, nil
}

// classify turns an engine error into a *sandbox.Error whose kind the
// edges understand, by the engine's error class (containerd's errdefs, as
// the client decodes the engine's HTTP status). msg is the client-safe
// message. A refused precondition or an existing object is a conflict, a
// request the engine finds malformed is invalid, and an engine that cannot
// be reached, or does not answer in time, is unavailable.
func classify(err error, msg string) error {
	var kind sandbox.Kind
	switch {
	case err == nil:
		return nil
	case cerrdefs.IsNotFound(err):
		kind = sandbox.KindNotFound
	case cerrdefs.IsConflict(err), cerrdefs.IsAlreadyExists(err), cerrdefs.IsFailedPrecondition(err):
		kind = sandbox.KindConflict
	case cerrdefs.IsInvalidArgument(err):
		kind = sandbox.KindInvalid
	case client.IsErrConnectionFailed(err), cerrdefs.IsUnavailable(err),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		kind = sandbox.KindUnavailable
	default:
		kind = sandbox.KindInternal
	}
	return sandbox.Wrap(kind, err, msg)
}
