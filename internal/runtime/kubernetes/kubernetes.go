// Package kubernetes runs sandboxes as pods on a Kubernetes cluster through
// its API (k8s.io/client-go).
//
// It owns the shape of a sandbox's pod: the template image with Warren's
// static agent as its entrypoint, the agent copied out of the agent image
// by an init container into an emptyDir mounted read-only (no image is
// rebuilt); labels for reconciliation; limits from the spec; a security
// context as tight as the Docker engine's. The control plane reaches the
// agent at the pod's IP, port sandbox.AgentPort.
//
// What the Kubernetes API cannot do (freeze a pod's processes, cap its
// process count) it asks of Warren's node agent (package nodeagent, the
// `warren node` DaemonSet) on the pod's node. An informer follows the pods
// so that one deleted or ended behind the server's back is reported at
// once (sandbox.EventWatcher). It does not own sandbox state (the
// lifecycle manager does) and never talks to the sandbox's agent.
package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	k8s "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Defaults of Config.
const (
	DefaultNamespace    = "warren"
	DefaultRuntimeClass = "gvisor"
	// DefaultAgentImage is the image holding the static agent (and the
	// warren binary that copies it), built by scripts/kube-images.sh.
	DefaultAgentImage = "warren/node:latest"
	// DefaultPullPolicy: the nodes hold the images, imported by their
	// agents.
	DefaultPullPolicy = "Never"
	// DefaultRequestPercent: a pod reserves a tenth of its sandbox's
	// limits.
	DefaultRequestPercent = 10
)

// AgentMountPath is where the agent binary appears inside every sandbox,
// as under Docker.
const AgentMountPath = "/.warren/warren-agent"

// Config configures the runtime. Only Client is required.
type Config struct {
	// Client talks to the API server. Required (see ClientFromKubeconfig).
	Client k8s.Interface
	// Namespace holds the sandboxes' pods. Default DefaultNamespace.
	Namespace string
	// Instance is the value of sandbox.LabelManaged on the pods this
	// runtime creates and the only value List returns, so that two servers
	// sharing a namespace never adopt each other's pods. Default
	// sandbox.DefaultInstance.
	Instance string
	// AgentImage is the image whose /warren binary copies the agent into a
	// sandbox's pod (`warren node install-agent`). Default
	// DefaultAgentImage.
	AgentImage string
	// PullPolicy of the sandboxes' and the agent's images: "Never" (images
	// are imported into the nodes' containerd) or "IfNotPresent" (pulled
	// from a registry). Default DefaultPullPolicy. With Registry, sandboxes' images
	// are pulled whatever it says.
	PullPolicy string
	// Registry is a repository prefix (host[:port][/path]) in a registry
	// the kubelets pull from. With it, the builder's images are pushed
	// there (at the end of a template's build, or before the first pod of
	// an image not pushed yet) and pods name them by digest, instead of
	// being imported into the nodes; Source must push (ImagePusher).
	// A snapshot is pushed once copied into the builder; other images
	// committed on a node go node to node (images.go).
	Registry string
	// GVisorRuntimeClass is the RuntimeClass of sandboxes whose spec asks
	// for sandbox.RuntimeGVisor. Default DefaultRuntimeClass.
	GVisorRuntimeClass string
	// Caps is the capability set of every sandbox (all others are
	// dropped). Required: the server passes the Docker engine's.
	Caps []string
	// RequestPercent is the share of its limits a sandbox's pod requests
	// (what the scheduler reserves), 1 to 100. Sandboxes idle most of the
	// time, as under Docker, where nothing is reserved. Default
	// DefaultRequestPercent.
	RequestPercent int
	// StartTimeout bounds how long Create and Start wait for a pod to run.
	// Default 2 minutes.
	StartTimeout time.Duration
	// Images answers for the images sandboxes run: the Docker engine
	// templates are built with (the builder). Required.
	Images sandbox.Images
	// Source streams the builder's images, which the runtime imports into
	// the nodes when PullPolicy is "Never" (see images.go). nil: the nodes
	// must have them already.
	Source ImageSource
	// Nodes reaches the node agents; nil = none, and freezing, process
	// limits and stats are unavailable.
	Nodes NodeAgents
	// Refuse are networks no sandbox pod reaches beside
	// podnet.DefaultRefused and the nodes' addresses and pod networks,
	// which the runtime adds itself. Default none.
	Refuse []netip.Prefix
	// APIServerHost is the API server's address or name, refused to
	// sandboxes. Default: the host Client talks to, when it is a
	// *kubernetes.Clientset.
	APIServerHost string
	// Leading reports whether this server leads its replicas (several
	// sharing one store elect one, internal/leader): only the leader
	// collects the nodes' unused images. nil = it leads alone.
	Leading func() bool
	// Logger receives the runtime's logs; nil discards them.
	Logger *slog.Logger
}

// Runtime runs sandboxes as pods. It is safe for concurrent use.
type Runtime struct {
	cfg Config
	cli k8s.Interface
	ns  string
	log *slog.Logger

	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	pods     corelisters.PodNamespaceLister
	ctx      context.Context // the runtime's life: background imports, collection
	stop     context.CancelFunc
	img      *nodeImages

	giveWay atomic.Pointer[func(context.Context) bool] // see OnCrowded
	// afterThaw runs at the end of Thaw: the Firewall sets the neighbours
	// of the pods it could not change while they were frozen.
	afterThaw atomic.Pointer[func(context.Context)]
	// beforeDelete runs before a sandbox pod at an address is deleted:
	// the Firewall closes its neighbours' pods to that address, which the
	// cluster may give another pod once it is deleted.
	beforeDelete atomic.Pointer[func(context.Context, netip.Addr)]
	cluster      clusterNetworks // what sandboxes are refused; see refused
	unspared     sync.Map        // node name → true once spareAgent failed there

	mu      sync.Mutex
	waiters map[string][]chan struct{} // pod name → who waits for its next change
	samples map[string]cpuSample       // pod name → last CPU sample for Stats
}

// The capabilities the Kubernetes engine has: a Committer through the node
// agents (snapshots and forks; stopped pause, see stop.go, commits too),
// but no Checkpointer (CRIU fails on these kernels, and gVisor's
// containerd shim answers a checkpoint Unimplemented).
var (
	_ sandbox.Runtime        = (*Runtime)(nil)
	_ sandbox.Freezer        = (*Runtime)(nil)
	_ sandbox.Crowdable      = (*Runtime)(nil)
	_ sandbox.Committer      = (*Runtime)(nil)
	_ sandbox.StatsReader    = (*Runtime)(nil)
	_ sandbox.LogReader      = (*Runtime)(nil)
	_ sandbox.EventWatcher   = (*Runtime)(nil)
	_ sandbox.Pinger         = (*Runtime)(nil)
	_ sandbox.RuntimeChecker = (*Runtime)(nil)
)

// ClientFromKubeconfig returns a client for the cluster a kubeconfig file
// names, or for the cluster the process runs in when path is "".
func ClientFromKubeconfig(path string) (k8s.Interface, error) {
	var cfg *rest.Config
	var err error
	if path == "" {
		cfg, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, errors.New("no kubeconfig: pass --kubeconfig FILE (WARREN_KUBECONFIG), or run in a pod")
		}
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	// Creates and deletes come in bursts (a warm pool filling, an e2e
	// suite): client-go's default of 5 requests per second would queue them.
	cfg.QPS, cfg.Burst = 200, 400
	return k8s.NewForConfig(cfg)
}

// New returns a runtime on cfg.Client and starts following the namespace's
// pods. Close stops it.
func New(cfg Config) (*Runtime, error) {
	if cfg.Client == nil {
		return nil, errors.New("kubernetes runtime: Client is required")
	}
	if cfg.Images == nil {
		return nil, errors.New("kubernetes runtime: Images is required")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.Instance == "" {
		cfg.Instance = sandbox.DefaultInstance
	}
	if cfg.AgentImage == "" {
		cfg.AgentImage = DefaultAgentImage
	}
	switch cfg.PullPolicy {
	case "":
		cfg.PullPolicy = DefaultPullPolicy
	case "Never", "IfNotPresent", "Always":
	default:
		return nil, fmt.Errorf("kubernetes runtime: pull policy %q: want Never, IfNotPresent or Always", cfg.PullPolicy)
	}
	if cfg.GVisorRuntimeClass == "" {
		cfg.GVisorRuntimeClass = DefaultRuntimeClass
	}
	if cfg.RequestPercent == 0 {
		cfg.RequestPercent = DefaultRequestPercent
	}
	if cfg.RequestPercent < 1 || cfg.RequestPercent > 100 {
		return nil, fmt.Errorf("kubernetes runtime: request percent %d: want 1 to 100", cfg.RequestPercent)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 2 * time.Minute
	}
	if cs, ok := cfg.Client.(*k8s.Clientset); ok && cfg.APIServerHost == "" {
		cfg.APIServerHost = cs.CoreV1().RESTClient().Get().URL().Hostname()
	}
	r := &Runtime{cfg: cfg, cli: cfg.Client, ns: cfg.Namespace, log: logkey.For(cfg.Logger, "kubernetes"),
		img: newNodeImages(), waiters: map[string][]chan struct{}{}, samples: map[string]cpuSample{}}
	r.ctx, r.stop = context.WithCancel(context.Background())
	r.startInformer()
	if cfg.Nodes != nil && cfg.PullPolicy == "Never" {
		go r.collectLoop()
	}
	return r, nil
}

// Close stops following pods.
func (r *Runtime) Close() error {
	r.stop()
	r.factory.Shutdown()
	return nil
}

// Ping checks that the API server answers and the namespace exists, and
// returns the server's version.
func (r *Runtime) Ping(ctx context.Context) (string, error) {
	v, err := r.cli.Discovery().ServerVersion()
	if err != nil {
		return "", classify(err, "the Kubernetes API server is unreachable")
	}
	if _, err := r.cli.CoreV1().Namespaces().Get(ctx, r.ns, metaGet); err != nil {
		if apierrors.IsNotFound(err) {
			return "", sandbox.Errorf(sandbox.KindUnavailable, "namespace %q does not exist: apply deploy/kubernetes/ or pass --namespace", r.ns)
		}
		return "", classify(err, "cannot read the sandboxes' namespace")
	}
	return v.GitVersion, nil
}

// classify turns an API error into a *sandbox.Error whose kind the edges
// understand. msg is the client-safe message.
func classify(err error, msg string) error {
	var kind sandbox.Kind
	var se *sandbox.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return err
	case apierrors.IsNotFound(err):
		kind = sandbox.KindNotFound
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
		kind = sandbox.KindConflict
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		kind = sandbox.KindInvalid
	case apierrors.IsForbidden(err):
		// The server's own service account lacks a permission: an
		// operator's fix, not the client's fault.
		kind = sandbox.KindInternal
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsServiceUnavailable(err),
		apierrors.IsTooManyRequests(err), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		kind = sandbox.KindUnavailable
	default:
		kind = sandbox.KindInternal
	}
	return sandbox.Wrap(kind, err, msg)
}
