package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/warrenhq/warren/internal/agentclient"
	"github.com/warrenhq/warren/internal/firewall"
	"github.com/warrenhq/warren/internal/nodeagent"
	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/runtime/kubernetes"
	"github.com/warrenhq/warren/internal/server"
)

// The engines warren serve runs sandboxes on.
const (
	engineDocker     = "docker"
	engineKubernetes = "kubernetes"
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
}

func addKubeFlags(e *envFlags, engine *string, k *kubeConfig) {
	e.String(engine, "engine", engineDocker, "where sandboxes run: docker (containers on the local engine) or kubernetes (pods on a cluster; templates are still built by the local Docker engine)")
	e.String(&k.Kubeconfig, "kubeconfig", "", "with --engine kubernetes: kubeconfig file of the cluster (default: the cluster this runs in, from its service account)")
	e.String(&k.Namespace, "namespace", kubernetes.DefaultNamespace, "with --engine kubernetes: namespace of the sandboxes' pods")
	e.String(&k.RuntimeClass, "gvisor-runtime-class", kubernetes.DefaultRuntimeClass, "with --engine kubernetes: RuntimeClass of sandboxes under --runtime gvisor")
	e.String(&k.AgentImage, "agent-image", kubernetes.DefaultAgentImage, "with --engine kubernetes: image holding warren and warren-agent, whose init container delivers the agent into every pod (scripts/kube-images.sh)")
	e.String(&k.PullPolicy, "image-pull-policy", "Never", "with --engine kubernetes: Never (images imported into the nodes) or IfNotPresent (pulled from a registry)")
	e.String(&k.NodeTokenSecret, "node-token-secret", "warren-node-token", "with --engine kubernetes: Secret (key token) shared with the warren node DaemonSet, for freezing pods (\"\": no node agents, frozen pause unavailable)")
	e.Int(&k.RequestPercent, "request-percent", 10, "with --engine kubernetes: share of a sandbox's CPU and memory limits its pod requests from the scheduler (1-100)")
}

// checkEngine validates --engine and what it implies.
func checkEngine(cfg serveConfig, firewallSet bool) error {
	switch cfg.Engine {
	case engineDocker:
		return nil
	case engineKubernetes:
	default:
		return usageError{fmt.Sprintf("--engine=%q: want docker or kubernetes", cfg.Engine)}
	}
	if firewallSet && cfg.Firewall != "off" {
		return usageError{"--firewall=" + cfg.Firewall + " guards the Docker engine's bridge; with --engine kubernetes egress rules are refused: leave --firewall unset or off"}
	}
	if cfg.Kube.RequestPercent < 1 || cfg.Kube.RequestPercent > 100 {
		return usageError{"--request-percent must be 1 to 100"}
	}
	return nil
}

// runServeKubernetes serves with sandboxes as pods. The local Docker
// engine still builds templates and answers for their images.
func (m *Main) runServeKubernetes(ctx context.Context, cfg serveConfig, log *slog.Logger) error {
	cli, err := kubernetes.ClientFromKubeconfig(cfg.Kube.Kubeconfig)
	if err != nil {
		return err
	}
	images, err := docker.New(docker.Config{AgentPath: cfg.AgentPath, Network: cfg.Network, Instance: cfg.Instance, Logger: log})
	if err != nil {
		return fmt.Errorf("%w (templates are built with the local Docker engine; run \"warren doctor\")", err)
	}
	defer images.Close()
	buildNet, _, err := images.EnsureBuildNetwork(ctx)
	if err != nil {
		return fmt.Errorf("template build network: %w (run \"warren doctor\")", err)
	}
	kc := kubernetes.Config{Client: cli, Namespace: cfg.Kube.Namespace, Instance: cfg.Instance,
		AgentImage: cfg.Kube.AgentImage, PullPolicy: cfg.Kube.PullPolicy, GVisorRuntimeClass: cfg.Kube.RuntimeClass,
		Caps: docker.DefaultCapabilities(), RequestPercent: cfg.Kube.RequestPercent, Images: images, Source: images, Logger: log}
	if cfg.Kube.NodeTokenSecret != "" {
		token, err := nodeToken(ctx, cli, cfg.Kube.Namespace, cfg.Kube.NodeTokenSecret)
		if err != nil {
			return err
		}
		kc.Nodes = kubernetes.NewNodeAgentPods(cli, cfg.Kube.Namespace, token)
	} else {
		log.Warn("no node agents (--node-token-secret is empty): pauses, snapshots, forks, process limits and per-sandbox stats are unavailable, and the nodes must have every image already")
	}
	rt, err := kubernetes.New(kc)
	if err != nil {
		return err
	}
	defer rt.Close()
	if v, err := rt.Ping(ctx); err != nil {
		return err
	} else {
		log.Info("sandboxes run as pods", "cluster", v, "namespace", cfg.Kube.Namespace)
	}
	if err := rt.CheckRuntime(ctx, cfg.Lifecycle.SandboxRuntime); err != nil {
		return fmt.Errorf("--runtime=%s: %w", cfg.Lifecycle.SandboxRuntime, err)
	}
	const noFirewall = "the Kubernetes engine leaves what sandboxes reach to the cluster's network policy"
	log.Warn("egress rules are refused: " + noFirewall)
	cfg.Firewall = "off"
	ac := agentclient.New()
	builder := kubeBuilder{Builder: images.Builder(buildNet), rt: rt}
	return m.serve(ctx, newServer(cfg, server.Deps{Runtime: rt, Agent: ac, Tunnels: ac, Firewall: firewall.Off{Why: noFirewall}, Builder: builder,
		Commands: ac, Terminals: ac, Files: ac, Logger: log}), log)
}

// kubeBuilder builds templates with the local Docker engine once the
// snapshots being copied into it from the nodes are there, since a build
// may start from one (fromTemplate of a snapshot), and brings the image
// built to the nodes before the build is done.
type kubeBuilder struct {
	*docker.Builder
	rt *kubernetes.Runtime
}

func (b kubeBuilder) Build(ctx context.Context, contextTar io.Reader, tag string, noCache bool, out func(string)) error {
	if err := b.rt.BuilderCopies(ctx); err != nil {
		return err
	}
	if err := b.Builder.Build(ctx, contextTar, tag, noCache, out); err != nil {
		return err
	}
	b.rt.Distribute(ctx, tag, out)
	return nil
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

// engineName is the engine as the dashboard shows it.
func engineName(engine string) string {
	if engine == engineKubernetes {
		return "Kubernetes"
	}
	return "Docker"
}

// isSet reports whether the command line gave flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
