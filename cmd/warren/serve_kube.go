package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/distribution/reference"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/warrenhq/warren/internal/buildkit"
	"github.com/warrenhq/warren/internal/firewall"
	"github.com/warrenhq/warren/internal/nodeagent"
	"github.com/warrenhq/warren/internal/registry"
	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/runtime/kubernetes"
	"github.com/warrenhq/warren/internal/server"
	"github.com/warrenhq/warren/internal/template"
)

// kubeConfig is what --engine kubernetes runs with.
type kubeConfig struct {
	Kubeconfig   string // "" = in-cluster
	Namespace    string
	RuntimeClass string // of gVisor sandboxes
	AgentImage   string
	PullPolicy   string
	// NodeTokenSecret names the Secret (key "token") whose token the
	// node agents take; "" = no node agents.
	NodeTokenSecret string
	RequestPercent  int
	// Registry is where built images are pushed for the kubelets to pull
	// ("": imported into the nodes by their agents).
	Registry string
	// VolumeStorageClass is the StorageClass of volumes' claims; "" =
	// the cluster's default.
	VolumeStorageClass string
	// VolumeAccessMode is the access mode of volumes' claims:
	// ReadWriteOnce ("" too) or ReadWriteMany.
	VolumeAccessMode string
	// BuildKit is the address of the buildkitd that builds templates
	// (tcp://host:port); "" = the local Docker engine builds them.
	BuildKit string
	// BuildKitRegistry is Registry's host[:port] as buildkitd reaches
	// it; "" = Registry's own.
	BuildKitRegistry string
	// PodName is this replica's pod (the downward API's metadata.name),
	// its name in the leader election's Lease; "" = hostname and
	// process ID (a server outside the cluster).
	PodName string
}

// addKubeFlags defines the flags of --engine kubernetes.
func addKubeFlags(e *envFlags, cfg *serveConfig) {
	k := &cfg.Kube
	e.String(&k.Kubeconfig, "kubeconfig", "", "with --engine kubernetes: kubeconfig file of the cluster (default: the cluster this runs in, from its service account)")
	e.String(&k.Namespace, "namespace", kubernetes.DefaultNamespace, "with --engine kubernetes: namespace of the sandboxes' pods")
	e.String(&k.RuntimeClass, "gvisor-runtime-class", kubernetes.DefaultRuntimeClass, "with --engine kubernetes: RuntimeClass of sandboxes under --runtime gvisor")
	e.String(&k.AgentImage, "agent-image", kubernetes.DefaultAgentImage, "with --engine kubernetes: image holding warren and warren-agent, whose init container delivers the agent into every pod (scripts/kube-images.sh)")
	e.String(&k.PullPolicy, "image-pull-policy", kubernetes.DefaultPullPolicy, "with --engine kubernetes: Never (images imported into the nodes) or IfNotPresent (pulled from a registry)")
	e.String(&k.NodeTokenSecret, "node-token-secret", "warren-node-token", "with --engine kubernetes: Secret (key token) shared with the warren node DaemonSet, for freezing pods (\"\": no node agents, frozen pause unavailable)")
	e.String(&k.Registry, "registry", "", "with --engine kubernetes: repository prefix (host[:port][/path]) in a registry the kubelets pull from: built images are pushed there and pods name them by digest (default: none, the node agents import images into the nodes)")
	e.String(&k.BuildKit, "buildkit", "", "with --engine kubernetes: address of the buildkitd that builds templates (tcp://host:port; deploy/kubernetes/buildkitd.yaml), which pushes them to --registry; no Docker engine is used (default: none, the local Docker engine builds them)")
	e.String(&k.BuildKitRegistry, "buildkit-registry", "", "with --buildkit: the host[:port] of --registry as buildkitd reaches it, where that differs (default: --registry's)")
	e.String(&k.PodName, "pod-name", "", "with --engine kubernetes and a PostgreSQL --store: this replica's pod name, its identity in the leader election (the Deployment sets it from the downward API; default: hostname and process ID)")
	e.String(&k.VolumeStorageClass, "volume-storage-class", "", "with --engine kubernetes: StorageClass of the volumes' PersistentVolumeClaims, of --volume-size-mb each (default: the cluster's default class)")
	e.String(&k.VolumeAccessMode, "volume-access-mode", "ReadWriteOnce", "with --engine kubernetes: access mode of the volumes' claims: ReadWriteOnce (a volume's sandboxes run on its node) or ReadWriteMany (they spread over the nodes; a class whose volumes every node mounts, as warren-shared)")
	e.Int(&k.RequestPercent, "request-percent", kubernetes.DefaultRequestPercent, "with --engine kubernetes: share of a sandbox's CPU and memory limits its pod requests from the scheduler (1-100)")
}

// checkKubernetes validates the settings of --engine kubernetes.
func checkKubernetes(cfg serveConfig) error {
	if cfg.Kube.RequestPercent < 1 || cfg.Kube.RequestPercent > 100 {
		return usageError{"--request-percent must be 1 to 100"}
	}
	if _, err := kubernetes.AccessMode(cfg.Kube.VolumeAccessMode); err != nil {
		return usageError{"--volume-access-mode: " + err.Error()}
	}
	if r := cfg.Kube.Registry; r != "" {
		if _, err := reference.ParseNormalizedNamed(r + "/image:tag"); err != nil || strings.HasSuffix(r, "/") {
			return usageError{fmt.Sprintf("--registry=%q: want a repository prefix such as registry.example.com:5000/warren (no tag, no trailing slash)", r)}
		}
	}
	if cfg.Kube.BuildKit != "" && cfg.Kube.Registry == "" {
		return usageError{"--buildkit needs --registry: buildkitd pushes the templates' images there and the nodes pull them from it"}
	}
	if cfg.Kube.BuildKitRegistry != "" && cfg.Kube.BuildKit == "" {
		return usageError{"--buildkit-registry is for --buildkit"}
	}
	return nil
}

// openKubernetes runs sandboxes as pods. The local Docker engine still
// builds templates and answers for their images, behind the host's
// firewall; every sandbox pod isolates itself (its init container), and
// the node agents enforce egress settings on their nodes.
func openKubernetes(ctx context.Context, cfg serveConfig, log *slog.Logger) (_ server.Deps, _ func(), err error) {
	var u undo
	defer func() {
		if err != nil {
			u.run()
		}
	}()
	cli, err := kubernetes.ClientFromKubeconfig(cfg.Kube.Kubeconfig)
	if err != nil {
		return server.Deps{}, nil, err
	}
	kc := kubernetes.Config{Client: cli, Namespace: cfg.Kube.Namespace, Instance: cfg.Instance,
		AgentImage: cfg.Kube.AgentImage, PullPolicy: cfg.Kube.PullPolicy, GVisorRuntimeClass: cfg.Kube.RuntimeClass,
		Caps: docker.DefaultCapabilities(), RequestPercent: cfg.Kube.RequestPercent,
		Registry: cfg.Kube.Registry, Logger: log}
	var images localDocker
	var bk *buildkit.Builder
	if cfg.Kube.BuildKit != "" {
		if bk, err = openBuildKit(ctx, cfg, &kc, log, &u); err != nil {
			return server.Deps{}, nil, err
		}
	} else {
		if images, err = openLocalDocker(dockerConfig(cfg, log), "templates are built with the local Docker engine; run \"warren doctor\"", &u); err != nil {
			return server.Deps{}, nil, err
		}
		if err := images.ensureBuildNetwork(ctx); err != nil {
			return server.Deps{}, nil, err
		}
		kc.Images, kc.Source = images.rt, images.rt
	}
	var token string
	if cfg.Kube.NodeTokenSecret != "" {
		if token, err = nodeToken(ctx, cli, cfg.Kube.Namespace, cfg.Kube.NodeTokenSecret); err != nil {
			return server.Deps{}, nil, err
		}
		kc.Nodes = kubernetes.NewNodeAgentPods(cli, cfg.Kube.Namespace, token)
	} else {
		log.Warn("no node agents (--node-token-secret is empty): pauses, snapshots, forks, process limits and per-sandbox stats are unavailable, and the nodes must have every image already")
	}
	el, err := replicaElection(ctx, cfg, cli, token, log)
	if err != nil {
		return server.Deps{}, nil, err
	}
	if el != nil {
		kc.Leading = el.Leading
	}
	rt, err := kubernetes.New(kc)
	if err != nil {
		return server.Deps{}, nil, err
	}
	u.push(func() { rt.Close() })
	v, err := rt.Ping(ctx)
	if err != nil {
		return server.Deps{}, nil, err
	}
	log.Info("sandboxes run as pods", "cluster", v, "namespace", cfg.Kube.Namespace)
	if err := rt.CheckRuntime(ctx, cfg.Lifecycle.SandboxRuntime); err != nil {
		return server.Deps{}, nil, fmt.Errorf("--runtime=%s: %w", cfg.Lifecycle.SandboxRuntime, err)
	}
	if cfg.Firewall != "off" && bk == nil {
		stop, err := guardBuilds(ctx, cfg, images, rt.PodNetworks, log)
		if err != nil {
			return server.Deps{}, nil, err
		}
		u.push(stop)
	}
	deps := agentDeps(log)
	deps.Runtime = rt
	if bk != nil {
		deps.Builder = kubeBuild{Engine: bk, rt: rt}
	} else {
		deps.Builder = kubeBuild{Engine: images.rt.Builder(images.buildNet), rt: rt}
	}
	if agents, ok := kc.Nodes.(*kubernetes.NodeAgentPods); ok {
		// Every sandbox pod's isolation is its own namespace's; what its
		// egress settings refuse beyond that, its node's agent enforces.
		roots, err := kubeEgressRoots(cfg.EgressTrustCA)
		if err != nil {
			return server.Deps{}, nil, err
		}
		fw := kubernetes.NewFirewall(rt, agents, kubernetes.FirewallConfig{DNS: cfg.EgressDNS, Roots: roots,
			PublicProxiesOnly: !cfg.EgressProxyPrivate, Logger: log})
		u.push(func() { fw.Close() })
		deps.Firewall = fw
	} else {
		const why = "it runs without node agents (--node-token-secret \"\"), which enforce egress settings on Kubernetes"
		log.Warn("egress settings are refused: " + why)
		deps.Firewall = firewall.Off{Why: why}
	}
	if el != nil {
		deps.Leadership, deps.ForwardSecret, deps.LostLeadership = el, token, lostLeadership(log)
	}
	var volAgents kubernetes.VolumeAgents // nil: no content API
	if agents, ok := kc.Nodes.(*kubernetes.NodeAgentPods); ok {
		volAgents = agents
	}
	mode, _ := kubernetes.AccessMode(cfg.Kube.VolumeAccessMode) // checked by checkKubernetes
	deps.VolumeClaims = kubernetes.NewVolumes(cli, cfg.Kube.Namespace, cfg.Kube.VolumeStorageClass, mode, cfg.Instance, volAgents, log)
	return deps, u.run, nil
}

// guardRestore is how often the template builds' firewall learns the
// cluster's pod networks again and is reinstalled, in case an engine
// restart dropped its jumps.
const guardRestore = 30 * time.Second

// guardBuilds keeps template builds, which run on the local Docker engine
// whatever the engine of sandboxes, from the host, from each other and
// from the cluster's pods (podNetworks): the firewall of --engine docker,
// over a sandbox bridge no sandbox uses here. It returns what removes it
// again.
func guardBuilds(ctx context.Context, cfg serveConfig, images localDocker,
	podNetworks func(context.Context) ([]netip.Prefix, error), log *slog.Logger) (stop func(), err error) {
	hfw, _, err := newHostFirewall(ctx, cfg, images, log)
	if err != nil {
		return nil, fmt.Errorf("template builds' isolation: %w", err)
	}
	fw := hfw.(*firewall.Firewall)
	warned := false
	guard := func(ctx context.Context) error {
		nets, err := podNetworks(ctx)
		if err == nil && len(nets) == 0 && !warned {
			warned = true
			log.Warn("no pod network known (no node agent, or nodes without spec.podCIDRs): template builds can reach the cluster's pods")
		}
		if err == nil {
			err = fw.RefuseToBuilds(ctx, nets)
		}
		return errors.Join(err, fw.Restore(ctx))
	}
	if err := guard(ctx); err != nil {
		fw.Close()
		return nil, fmt.Errorf("template builds' isolation: %w; to build without it, start with --firewall=off", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(guardRestore)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := guard(ctx); err != nil && ctx.Err() == nil {
					log.Error("cannot reinstall the template builds' firewall rules", "err", err)
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer ucancel()
		if err := fw.Uninstall(uctx); err != nil {
			log.Warn("cannot remove the template builds' firewall rules", "err", err)
		}
		fw.Close()
	}, nil
}

// kubeBuild builds templates with the local Docker engine's builder or
// on buildkitd once the snapshots being brought from the nodes (into the
// Docker engine, or pushed to the registry) are there, since a build may
// start from one (fromTemplate of a snapshot), and brings the image built
// to the nodes, or names it by digest, before the build is done.
type kubeBuild struct {
	template.Engine
	rt *kubernetes.Runtime
}

func (b kubeBuild) Build(ctx context.Context, contextTar io.Reader, tag string, noCache bool, out func(string)) error {
	if err := b.rt.BuilderCopies(ctx); err != nil {
		return err
	}
	if err := b.Engine.Build(ctx, contextTar, tag, noCache, out); err != nil {
		return err
	}
	b.rt.Distribute(ctx, tag, out)
	return nil
}

// openBuildKit connects to the buildkitd of --buildkit and makes the
// registry of --registry the store of the images sandboxes run: what
// buildkitd pushes, the base images, the snapshots. Builds are isolated
// by buildkitd's pod (deploy/kubernetes/buildkitd.yaml), not here.
func openBuildKit(ctx context.Context, cfg serveConfig, kc *kubernetes.Config, log *slog.Logger, u *undo) (*buildkit.Builder, error) {
	store, err := registry.New(cfg.Kube.Registry, registry.PlainHTTP(cfg.Kube.Registry))
	if err != nil {
		return nil, usageError{fmt.Sprintf("--registry: %v", err)}
	}
	bk, err := buildkit.New(ctx, buildkit.Config{Addr: cfg.Kube.BuildKit, Images: store, RegistryHost: cfg.Kube.BuildKitRegistry,
		Dir: filepath.Join(cfg.StateDir, "template-builds")})
	if err != nil {
		return nil, err
	}
	u.push(func() { bk.Close() })
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := bk.Ping(pctx)
	if err != nil {
		return nil, fmt.Errorf("--buildkit=%s: %w", cfg.Kube.BuildKit, err)
	}
	log.Info("templates are built on BuildKit", "buildkitd", cfg.Kube.BuildKit, "version", v, "registry", cfg.Kube.Registry)
	kc.Images, kc.Source = store, store
	return bk, nil
}

// nodeToken reads the node agents' token from its Secret.
func nodeToken(ctx context.Context, cli k8s.Interface, ns, name string) (string, error) {
	s, err := cli.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("no Secret %s/%s: make it (kubectl -n %s create secret generic %s --from-literal=token=$(openssl rand -hex 32)), or pass --node-token-secret \"\" to run without node agents",
			ns, name, ns, name)
	}
	if err != nil {
		return "", fmt.Errorf("reading the node agents' token: %w", err)
	}
	token := strings.TrimSpace(string(s.Data["token"]))
	if len(token) < nodeagent.MinTokenLen {
		return "", fmt.Errorf("Secret %s/%s: its key \"token\" must hold at least %d characters", ns, name, nodeagent.MinTokenLen)
	}
	return token, nil
}
