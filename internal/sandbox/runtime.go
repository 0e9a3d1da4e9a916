package sandbox

import (
	"context"
	"maps"
	"net/netip"
	"time"
)

// Labels Warren puts on every container it creates, so that reconciliation
// can tell its own containers from the rest of the engine. The engine
// (the Runtime) puts on those that say what a ContainerSpec already says,
// and the instance it serves: LabelManaged, LabelSandbox and LabelRuntime.
// The manager passes the others in ContainerSpec.Labels.
const (
	LabelManaged = "dev.warren.managed" // the server's instance name; the engine's
	LabelSandbox = "dev.warren.sandbox" // ContainerSpec.SandboxID; the engine's
	// LabelRuntime is the OCIRuntime the container runs under
	// (ContainerSpec.Runtime; the engine's). On an image it is the runtime
	// its sandboxes need, whatever the server's default (LABEL
	// dev.warren.runtime=gvisor in a Dockerfile).
	LabelRuntime = "dev.warren.runtime"
	LabelTeam    = "dev.warren.team" // the sandbox's team; the manager's
	// LabelPool marks a container made for the warm pool, for a sandbox
	// that does not exist yet; the manager's. Labels cannot change, so a
	// claimed one keeps it: the store, not the label, says whose a
	// container is.
	LabelPool = "dev.warren.pool" // "true"
	// LabelFork is on a fork image (ForkRepo): the instance of the server
	// that made it, so that it finds those its forks left (ForkLister).
	LabelFork = "dev.warren.fork"
)

// DefaultInstance is the instance name of a server not given one (serve's
// --instance): the value of LabelManaged on its containers, and the tag
// of its firewall chains. Servers sharing an engine need names of their
// own.
const DefaultInstance = "true"

// AgentPort is the agent's port inside every sandbox.
const AgentPort = 49983

// ContainerSpec is what the runtime needs to create a sandbox's container.
type ContainerSpec struct {
	SandboxID string
	Image     string
	// Labels are the manager's labels (LabelTeam, LabelPool); the engine
	// adds its own.
	Labels    map[string]string
	CPUCount  int // 0 = no limit
	MemoryMB  int // 0 = no limit
	PidsLimit int // 0 = no limit
	// DiskMB limits the container's writable layer, where the engine's
	// storage can (overlay2 on xfs with project quotas); 0 = no limit.
	DiskMB      int
	AgentSecret string
	// AgentArgs are the agent's command-line arguments (the container's
	// command), e.g. "-code-interpreter". nil = none.
	AgentArgs []string
	// Runtime is what the container runs under; "" = runc.
	Runtime OCIRuntime
	// Mounts are host directories bind-mounted read-write into the
	// container (volumes). nil = none.
	Mounts []Mount
}

// EngineLabels are the spec's labels with the engine's own added, for a
// server of the given instance: what every engine puts on a container.
func (s ContainerSpec) EngineLabels(instance string) map[string]string {
	labels := maps.Clone(s.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelManaged] = instance
	labels[LabelSandbox] = s.SandboxID
	labels[LabelRuntime] = string(s.Runtime)
	return labels
}

// Mount is a host directory mounted read-write at Target.
type Mount struct {
	Source, Target string
}

// Container is a sandbox's container as the runtime sees it.
type Container struct {
	ID        string
	SandboxID string // from LabelSandbox
	Labels    map[string]string
	Running   bool
	Paused    bool   // frozen
	AgentAddr string // 127.0.0.1:port of the published agent port; "" unless running
	// IP is the container's address on the sandbox network, which egress
	// rules match; invalid unless running. It may change on each start.
	IP netip.Addr
	// ImageID is the ID of the image it runs, as ImageID reports it.
	ImageID string
	// AgentSecret is the agent secret it was created with; Inspect fills
	// it in, List leaves it "".
	AgentSecret string
	// Ended says how a container that is not running ended, as far as its
	// engine knows (exit code, OOM kill, the end of its log); Inspect fills
	// it in, "" when running or unknown.
	Ended string
}

// Stats is one resource sample of a running container.
type Stats struct {
	Time       time.Time
	CPUCount   int
	CPUUsedPct float64
	MemUsed    int64
	MemTotal   int64
	MemCache   int64
	DiskUsed   int64
	DiskTotal  int64
}

// An engine runs sandboxes' containers and keeps their images. What the
// lifecycle manager needs of every engine is Runtime: Containers and
// Images. Everything else is an optional capability, an interface of its
// own that the manager looks for on the Runtime it is given (as Nomad asks
// a task driver for its capabilities): an engine implements the ones it can
// and leaves out the rest, and each capability's comment says what the
// manager does without it. Implementations: runtime/docker (the Docker
// engine, every capability), runtime/kubernetes (pods on a cluster, every
// capability but Checkpointer; Freezer, Committer, StatsReader and Stop
// through its node agents) and runtime/fake (in memory, for tests, every
// capability).
//
// Every method of every capability returns an *Error with KindNotFound
// when the container (or image) does not exist.

// Runtime is what the lifecycle manager requires of an engine.
type Runtime interface {
	Containers
	Images
}

// Containers creates, starts, stops and removes sandboxes' containers.
// Required.
type Containers interface {
	// Create creates and starts a container with the agent as its
	// entrypoint, and returns it running with AgentAddr set.
	Create(ctx context.Context, spec ContainerSpec) (Container, error)
	// Start starts a stopped container; AgentAddr may differ from before.
	// The container keeps its filesystem across a Stop and a Start.
	Start(ctx context.Context, id string) (Container, error)
	Stop(ctx context.Context, id string) error
	// Update changes a container's resource limits while it runs; a zero
	// limit is left as it is.
	Update(ctx context.Context, id string, cpuCount, memoryMB, pidsLimit int) error
	Remove(ctx context.Context, id string) error
	Inspect(ctx context.Context, id string) (Container, error)
	// List returns every container labelled LabelManaged.
	List(ctx context.Context) ([]Container, error)
}

// Images reads and removes the engine's images: those templates are built
// into, and snapshots'. Required.
type Images interface {
	// ImageExists reports whether an image is present locally.
	ImageExists(ctx context.Context, ref string) (bool, error)
	// ImageID returns the ID of the image ref names now; it changes when
	// the image is rebuilt under the same name. KindNotFound when absent.
	ImageID(ctx context.Context, ref string) (string, error)
	// ImageLabels returns the labels of the image ref names. KindNotFound
	// when absent.
	ImageLabels(ctx context.Context, ref string) (map[string]string, error)
	// InspectImage returns the image the engine finds for ref: by name,
	// but also by image ID or a prefix of one, which a client must never
	// be able to use (see ParseImageRef and Image.NamedBy). KindNotFound
	// when absent.
	InspectImage(ctx context.Context, ref string) (Image, error)
	RemoveImage(ctx context.Context, ref string) error
}

// Freezer is an engine that can freeze a running container's processes
// in memory and thaw them (a cgroup freeze). Without it a pause that
// keeps memory stops the container instead (PauseStopped: the sandbox
// keeps its filesystem and reboots on resume), unless the engine is a
// Checkpointer and the sandbox runs under gVisor, when it is checkpointed
// (PauseCheckpointed) as Config.PauseToDisk would.
type Freezer interface {
	Freeze(ctx context.Context, id string) error
	Thaw(ctx context.Context, id string) error
}

// Committer is an engine that can save a container's filesystem as an
// image. Without it snapshots and forks are refused (KindUnavailable).
type Committer interface {
	// Commit saves the container's filesystem as an image named ref and
	// returns its reference.
	Commit(ctx context.Context, id, ref string) (string, error)
}

// StatsReader is an engine that can sample a running container's
// resource use. Without it each sample is the agent's own (what the
// sandbox sees of its CPUs, memory and disk), and none when the agent
// cannot tell.
type StatsReader interface {
	Stats(ctx context.Context, id string) (Stats, error)
}

// LogReader is an engine that keeps what a container wrote to stdout and
// stderr, the agent's log. Without it a sandbox's log holds its lifecycle
// events only.
type LogReader interface {
	// Logs returns what the container wrote to stdout and stderr at or
	// after since (zero = from the start), oldest first.
	Logs(ctx context.Context, id string, since time.Time) ([]LogLine, error)
}

// RuntimeChecker is an engine that can tell whether it runs containers
// under an OCIRuntime; its error says how to set it up. Without it a
// sandbox may ask for any OCIRuntime, and one the engine cannot run fails
// at Create.
type RuntimeChecker interface {
	CheckRuntime(ctx context.Context, rt OCIRuntime) error
}

// Pinger is an engine that can say whether it answers, and its version,
// for the server's health checks. Without it the checks leave the engine
// out.
type Pinger interface {
	Ping(ctx context.Context) (version string, err error)
}

// ParallelStarter is an engine whose containers start somewhere else than
// on the server's machine (the nodes of a cluster), so that the warm pool
// may start more at once than this machine has CPUs: ParallelStarts of
// them. Without it the pool starts as many at once as there are CPUs.
type ParallelStarter interface {
	ParallelStarts() int
}

// Crowdable is an engine whose room for containers can run out while the
// warm pools hold some of it (a cluster's scheduler places pods within
// the nodes' capacity). OnCrowded hands it giveWay, which it calls while a
// sandbox's container finds no room; giveWay frees some, if it can, by
// removing idle pooled containers, and reports whether it did.
type Crowdable interface {
	OnCrowded(giveWay func(context.Context) bool)
}

// AgentInit is what the server tells a freshly started agent.
type AgentInit struct {
	// AgentSecret is the sandbox's agent secret: an agent started with
	// one takes /init only from who knows it.
	AgentSecret    string
	EnvVars        map[string]string
	AccessToken    string
	DefaultUser    string
	DefaultWorkdir string
	// CABundle is PEM certificates the agent installs into the
	// container's trust store; "" = none.
	CABundle string
	// Restored is set for an agent restored from another sandbox's memory
	// (a fork, a sandbox of a memory snapshot): the server secret and
	// access token that sandbox's agent held, which this one proves to be
	// given AgentSecret and AccessToken. Zero = a fresh agent.
	Restored AgentIdentity
	// Answered says the agent was seen answering (WaitReady) since its
	// container started, as a pooled container's was: Init then
	// configures it at once, without waiting for it to answer first.
	Answered bool
}

// AgentIdentity is what authenticates the server to an agent: its agent
// secret and the sandbox's envd access token ("" = none).
type AgentIdentity struct {
	AgentSecret, AccessToken string
}

// Agent talks to the agent inside a sandbox through its published port.
type Agent interface {
	// WaitReady waits until the agent at addr answers.
	WaitReady(ctx context.Context, addr string) error
	// Init waits for the agent at addr to answer (unless init.Answered),
	// then configures it.
	Init(ctx context.Context, addr string, init AgentInit) error
}

// Checkpointer is an engine that can save a container's processes and
// memory to disk and bring them back (gVisor's checkpoint and restore);
// whether a given container can be checkpointed depends on the runtime it
// runs under, and the manager only asks it of gVisor sandboxes. Without it
// a frozen sandbox demoted (by age, by the cap on frozen ones, by an
// operator) is stopped, losing its memory, and Config.PauseToDisk does
// nothing.
type Checkpointer interface {
	// Checkpoint saves a running or frozen container's processes and
	// memory to disk and stops it. On error the container may be left
	// running, frozen or stopped; the caller inspects it.
	Checkpoint(ctx context.Context, id string) error
	// Restore starts a checkpointed container from its checkpoint, with
	// its processes, memory and open ports as they were, and returns it
	// running; AgentAddr and IP may differ from before. The checkpoint is
	// deleted once restored.
	Restore(ctx context.Context, id string) (Container, error)
	// DeleteCheckpoint removes a container's checkpoint, if any.
	DeleteCheckpoint(ctx context.Context, id string) error
	// CheckpointsSize adds up the size on disk of the checkpoints of the
	// given containers, for the server's statistics.
	CheckpointsSize(ctx context.Context, containerIDs []string) (int64, error)
}

// MemoryCloner is an engine that can copy a running container's processes
// and memory into new containers (gVisor's checkpoint, taken with the
// container left running, restored into each); like Checkpointer, the
// manager only asks it of gVisor sandboxes. Memory images are named by
// keys the manager chooses (letters, digits, '_', '.', '-'). Without it
// forks and snapshots carry the filesystem only, and an explicit request
// for memory is refused.
type MemoryCloner interface {
	// SaveMemory checkpoints a running or frozen container's processes
	// and memory as the memory image key, leaving the container as it
	// was. A container stopped with its checkpoint (Checkpointer's)
	// gives that checkpoint, which it keeps; one stopped without is
	// KindConflict.
	SaveMemory(ctx context.Context, id, key string) error
	// CreateFromMemory creates spec's container and starts it from the
	// memory image key, which stays: the saved processes, memory and
	// listening sockets go on in it, under its own hostname and address.
	// spec must be the saved container's but for SandboxID, AgentSecret,
	// labels and resources. It returns the container running with
	// AgentAddr set; on failure nothing is left. ready, when not nil, is
	// called once the container is created, before anything is read of
	// the image: the image may still be in the making until it returns
	// (a fork creates its containers while it captures its source), and
	// an error from it ends the create.
	CreateFromMemory(ctx context.Context, spec ContainerSpec, key string, ready func(context.Context) error) (Container, error)
	// DeleteMemory removes the memory image key; none is no error.
	DeleteMemory(ctx context.Context, key string) error
	// MemoryImages returns the keys of the memory images kept.
	MemoryImages(ctx context.Context) ([]string, error)
}

// FileCopier is a MemoryCloner that can keep a frozen container's own
// files (what it wrote over its image) in a memory image, so that the
// containers CreateFromMemory restores from it, created from the saved
// container's image, start with a copy of them: a fork's filesystem
// without a commit. Without it, or when SaveFiles is KindUnavailable, a
// fork commits its source.
type FileCopier interface {
	// SaveFiles copies frozen container id's files into the memory image
	// key, which SaveMemory made.
	SaveFiles(ctx context.Context, id, key string) error
}

// ForkLister is an engine that can list the fork images (ForkRepo) it
// holds for this server. Without it a fork image left by a server killed
// during its fork stays until removed by hand.
type ForkLister interface {
	ForkImages(ctx context.Context) ([]string, error)
}

// ContainerEvent is something that happened to a container, as its engine
// reports it.
type ContainerEvent struct {
	ContainerID string
	Action      ContainerAction
}

// ContainerAction is what happened to a container.
type ContainerAction string

// The actions an EventWatcher reports: those after which a container may
// no longer be in the state its sandbox records. An engine's "kill",
// "stop" and "oom" are left out: a container they end also dies, and one
// that survives them is as it was.
const (
	ContainerDied      ContainerAction = "die"     // stopped running, for any reason
	ContainerDestroyed ContainerAction = "destroy" // removed
	ContainerPaused    ContainerAction = "pause"   // frozen
	ContainerUnpaused  ContainerAction = "unpause" // thawed
)

// EventWatcher is an engine that reports changes to its containers as they
// happen, so that one killed, stopped or removed behind Warren's back is
// noticed at once. Without it such changes are noticed at the next
// periodic reconcile (Config.ReconcileInterval).
type EventWatcher interface {
	// WatchContainers subscribes to the events of the containers List
	// returns. It returns once subscribed: every event from then on is
	// sent on the channel, in order, until ctx ends or the engine's
	// stream breaks (an engine restart), when the channel is closed.
	// Events come for Warren's own operations too (a pause stops or
	// freezes a container): they say what happened, not who did it. One
	// may come twice (Docker sometimes logs a pause twice, late).
	WatchContainers(ctx context.Context) (<-chan ContainerEvent, error)
}
