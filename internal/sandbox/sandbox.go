// Package sandbox is Warren's domain: the Sandbox type and its lifecycle
// states, the error kinds every edge maps once, and the small interfaces
// the lifecycle manager needs from a container runtime, a store and the
// in-sandbox agent. It imports nothing of Warren's; adapters implement its
// interfaces and only cmd/ wires them together.
package sandbox

import (
	"strings"
	"time"
)

// State is where a sandbox is in its lifecycle.
type State string

const (
	StateCreating State = "creating"
	StateRunning  State = "running"
	StatePaused   State = "paused"
	StateKilled   State = "killed"
)

// PauseMode says how a paused sandbox is kept. It is empty unless the
// sandbox is paused.
type PauseMode string

const (
	// PauseFrozen: the container's processes are frozen (docker pause);
	// memory is kept and resume takes milliseconds.
	PauseFrozen PauseMode = "frozen"
	// PauseStopped: the container is stopped; memory and processes are
	// gone, the filesystem is kept, resume restarts the agent.
	PauseStopped PauseMode = "stopped"
	// PauseCheckpointed: memory and processes are checkpointed to disk
	// (gVisor), no RAM is held, resume restores them.
	PauseCheckpointed PauseMode = "checkpointed"
)

// OCIRuntime is the runtime a sandbox's container runs under.
type OCIRuntime string

const (
	// RuntimeRunc shares the host's kernel (the engine's default).
	RuntimeRunc OCIRuntime = "runc"
	// RuntimeGVisor runs the container on gVisor's user-space kernel
	// (runsc): stronger isolation, and pause to disk with memory kept.
	RuntimeGVisor OCIRuntime = "gvisor"
)

// ParseOCIRuntime returns the runtime name s names; "" is runc.
func ParseOCIRuntime(s string) (OCIRuntime, error) {
	switch OCIRuntime(s) {
	case "", RuntimeRunc:
		return RuntimeRunc, nil
	case RuntimeGVisor:
		return RuntimeGVisor, nil
	}
	return "", Errorf(KindInvalid, "unknown runtime %q: want runc or gvisor", s)
}

// Sandbox is one sandbox as the store keeps it. The lifecycle manager is
// its only writer.
type Sandbox struct {
	ID         string
	TeamID     string
	TemplateID string // the template as resolved (ID, not alias)
	Alias      string // the alias the client asked for, if any
	Image      string // the image the container runs
	BuildID    string // the template build it runs; "" when not a built template
	// ExecutionID names the sandbox's current run: new at create and at
	// each resume (its lifecycle events carry it).
	ExecutionID string

	ContainerID string
	// AgentAddr is host:port of the agent's published port on 127.0.0.1.
	// It may change each time the container starts.
	AgentAddr string
	// AgentSecret authenticates the server to the agent's tunnel.
	AgentSecret string

	State     State
	PauseMode PauseMode // empty unless State is StatePaused
	// Runtime is what the container runs under; "" (records made before
	// runtimes existed) is runc.
	Runtime OCIRuntime

	CPUCount   int
	MemoryMB   int
	DiskSizeMB int

	Metadata map[string]string
	EnvVars  map[string]string

	EnvdAccessToken    string // always set by v2 create; v1 only when secure
	TrafficAccessToken string // set when public traffic is not allowed

	StartedAt time.Time
	// EndAt is when a running sandbox times out. While paused it is
	// meaningless; Remaining holds what is left.
	EndAt     time.Time
	PausedAt  time.Time // zero unless paused
	Remaining time.Duration
	// Timeout is the lifetime the client asked for at create; an
	// auto-resumed sandbox gets at least this long again.
	Timeout time.Duration
	// KilledAt is when the sandbox was killed; zero unless StateKilled.
	KilledAt time.Time

	Lifecycle Lifecycle
	Network   Network
	// IAM is the workload identity its network rules may use; zero =
	// none.
	IAM IAM

	StartCmd string // from the template, run by the agent after start
	ReadyCmd string // polled until it succeeds before create returns
	Workdir  string // default workdir from the template ("" = home)
	User     string // default user from the template ("" = "user")
	// AgentArgs are the agent's arguments (the container's command), from
	// the template, e.g. "-code-interpreter"; snapshots and forks of the
	// sandbox run their agent with them too. nil = none.
	AgentArgs []string
	// VolumeMounts are the volumes mounted into the sandbox; forks keep
	// them. nil = none.
	VolumeMounts []VolumeMount
}

// VolumeMount is a volume mounted read-write at Path in a sandbox.
type VolumeMount struct {
	Name     string // the volume's name, as the client gave it
	VolumeID string
	Path     string // absolute path in the sandbox
	Source   string // the volume's directory on the host
}

// Lifecycle is what happens when a sandbox times out and on traffic.
type Lifecycle struct {
	OnTimeout  TimeoutAction
	KeepMemory bool // with OnTimeout pause: keep memory (frozen) or not
	AutoResume bool // resume a paused sandbox on proxy traffic
}

// TimeoutAction is what a sandbox does when it reaches EndAt.
type TimeoutAction string

const (
	TimeoutKill  TimeoutAction = "kill"
	TimeoutPause TimeoutAction = "pause"
)

// Network holds a sandbox's network settings as the client set them.
type Network struct {
	AllowPublicTraffic  bool
	AllowInternetAccess bool
	AllowOut            []string
	DenyOut             []string
	MaskRequestHost     string
	EgressProxy         *EgressProxy // nil = none
	HTTPSPorts          []int
	// Rules maps a destination (a RuleKey in normal form) to header
	// transforms applied, in order, to outgoing requests to it (rules.go).
	// nil = none.
	Rules map[string][]NetworkRule
}

// EgressProxy is a SOCKS5 proxy for a sandbox's outgoing traffic.
type EgressProxy struct {
	Address  string // host:port
	Username string
	Password string
}

// NetworkRule is one transform of outgoing requests to a destination.
type NetworkRule struct {
	// Headers are set on the request, replacing any of the same name;
	// values may hold placeholders (see ParsePlaceholders).
	Headers map[string]string
}

// Running reports whether the sandbox is running.
func (s *Sandbox) Running() bool { return s.State == StateRunning }

// Warren's own images, which warren image build makes (internal/baseimage)
// and the built-in templates run unless the server is given others.
const (
	BaseImage            = "warren/base"             // the "base" template's
	CodeInterpreterImage = "warren/code-interpreter" // "code-interpreter-v1"'s
	MCPGatewayImage      = "warren/mcp-gateway"      // "mcp-gateway"'s
	DesktopImage         = "warren/desktop"          // "desktop"'s
)

// Repositories of the images Warren makes: committed sandboxes
// (snapshots, forks) and built templates (TemplateRepo/<template
// ID>:<build ID>). Each belongs to one team, which reaches it by the
// snapshot's or template's ID or name.
const (
	SnapshotRepo = "warren/snapshot"
	ForkRepo     = "warren/fork"
	TemplateRepo = "warren-template"
)

// OwnImage reports whether name, an image's repository in its familiar
// form ("warren/snapshot", not "docker.io/warren/snapshot"), is one of
// Warren's: no team may start a sandbox or a build from such an image by
// naming it.
func OwnImage(name string) bool {
	return name == SnapshotRepo || name == ForkRepo || strings.HasPrefix(name, TemplateRepo+"/")
}
