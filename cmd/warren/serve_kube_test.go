package main

import (
	"errors"
	"io"
	"testing"

	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/runtime/kubernetes"
)

func TestParseServeEngine(t *testing.T) {
	env := func(vars map[string]string) *Main {
		return &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return vars[k] }}
	}
	cfg, err := env(nil).parseServe(nil)
	if err != nil || cfg.Engine != engineDocker {
		t.Fatalf("default engine %q, %v", cfg.Engine, err)
	}
	cfg, err = env(map[string]string{"WARREN_ENGINE": "kubernetes", "WARREN_KUBECONFIG": "/k/config", "WARREN_NAMESPACE": "sbx"}).
		parseServe([]string{"--gvisor-runtime-class", "runsc-class"})
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Kube
	if cfg.Engine != engineKubernetes || k.Kubeconfig != "/k/config" || k.Namespace != "sbx" || k.RuntimeClass != "runsc-class" ||
		k.AgentImage != kubernetes.DefaultAgentImage || k.PullPolicy != "Never" || k.NodeTokenSecret != "warren-node-token" || k.RequestPercent != 10 {
		t.Errorf("kubernetes settings %+v", cfg)
	}
	if cfg, err := env(nil).parseServe([]string{"--engine", "kubernetes"}); err != nil || cfg.Kube.Namespace != kubernetes.DefaultNamespace {
		t.Errorf("default namespace %q, %v", cfg.Kube.Namespace, err)
	}
	if cfg, err := env(nil).parseServe([]string{"--engine", "kubernetes", "--registry", "127.0.0.1:5000/warren"}); err != nil || cfg.Kube.Registry != "127.0.0.1:5000/warren" {
		t.Errorf("--registry: %q, %v", cfg.Kube.Registry, err)
	}
	if cfg, err := env(map[string]string{"WARREN_BUILDKIT": "tcp://10.0.0.1:1234", "WARREN_BUILDKIT_REGISTRY": "10.0.0.2:5000"}).
		parseServe([]string{"--engine", "kubernetes", "--registry", "127.0.0.1:5000/w"}); err != nil || cfg.Kube.BuildKit != "tcp://10.0.0.1:1234" || cfg.Kube.BuildKitRegistry != "10.0.0.2:5000" {
		t.Errorf("--buildkit: %+v, %v", cfg.Kube, err)
	}
	for _, fw := range []string{"off", "iptables"} { // iptables: the template builds' isolation
		if _, err := env(nil).parseServe([]string{"--engine", "kubernetes", "--firewall", fw}); err != nil {
			t.Errorf("--firewall %s: %v", fw, err)
		}
	}
	for name, args := range map[string][]string{
		"unknown engine":                     {"--engine", "nomad"},
		"nftables on k8s":                    {"--engine", "kubernetes", "--firewall", "nftables"},
		"request percent 0":                  {"--engine", "kubernetes", "--request-percent", "0"},
		"request percent > 100":              {"--engine", "kubernetes", "--request-percent", "101"},
		"registry on docker":                 {"--registry", "127.0.0.1:5000"},
		"registry with a tag":                {"--engine", "kubernetes", "--registry", "reg:5000/w:latest"},
		"registry slash":                     {"--engine", "kubernetes", "--registry", "reg:5000/w/"},
		"registry not a name":                {"--engine", "kubernetes", "--registry", "Reg Istry"},
		"buildkit without registry":          {"--engine", "kubernetes", "--buildkit", "tcp://10.0.0.1:1234"},
		"buildkit-registry without buildkit": {"--engine", "kubernetes", "--registry", "r:5000", "--buildkit-registry", "10.0.0.1:5000"},
	} {
		if _, err := env(nil).parseServe(args); !errors.As(err, new(usageError)) {
			t.Errorf("%s: err %v, want usage error", name, err)
		}
	}
}

// The memory every sandbox may reserve in all is this machine's under
// Docker, and no limit under Kubernetes unless given.
func TestParseServeServerMemory(t *testing.T) {
	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, lifecycle.DefaultServerMemoryMB()},
		{[]string{"--server-memory-mb", "4096"}, 4096},
		{[]string{"--engine", "kubernetes"}, 0},
		{[]string{"--engine", "kubernetes", "--server-memory-mb", "4096"}, 4096},
	} {
		cfg, err := m.parseServe(tc.args)
		if err != nil || cfg.Lifecycle.ServerMemoryMB != tc.want {
			t.Errorf("%q: server memory %d, %v; want %d", tc.args, cfg.Lifecycle.ServerMemoryMB, err, tc.want)
		}
	}
	if _, err := m.parseServe([]string{"--server-memory-mb", "-1"}); !errors.As(err, new(usageError)) {
		t.Errorf("--server-memory-mb -1: %v, want a usage error", err)
	}
}
