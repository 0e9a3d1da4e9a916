package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/warrenhq/warren/internal/agentclient"
	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/server"
)

// The engines warren serve runs sandboxes on.
const (
	engineDocker     = "docker"
	engineKubernetes = "kubernetes"
)

// engine is one row of warren serve's engine table: a place sandboxes
// run. runServe, the flags and the dashboard follow from the rows, so an
// engine is added as a row, not as another wiring.
type engine struct {
	name  string // --engine's value
	title string // its name in the dashboard's server view
	// flags defines the engine's own flags; nil = none. Every row's flags
	// are defined whatever --engine says, so that help lists them all.
	flags func(e *envFlags, cfg *serveConfig)
	// check validates the settings when this engine is chosen.
	check func(cfg serveConfig) error
	// open makes the server's dependencies on the engine from the
	// settings, and the close that undoes what it made once the server
	// is closed. On an error it has undone it already.
	open func(ctx context.Context, cfg serveConfig, log *slog.Logger) (server.Deps, func(), error)
}

// engines is the engine table, --engine's default first.
func engines() []engine {
	return []engine{
		{name: engineDocker, title: "Docker", check: checkDocker, open: openDocker},
		{name: engineKubernetes, title: "Kubernetes", flags: addKubeFlags, check: checkKubernetes, open: openKubernetes},
	}
}

// engineNamed returns the row of --engine name.
func engineNamed(name string) (engine, error) {
	var names []string
	for _, e := range engines() {
		if e.name == name {
			return e, nil
		}
		names = append(names, e.name)
	}
	return engine{}, usageError{fmt.Sprintf("--engine=%q: want %s", name, strings.Join(names, " or "))}
}

// addEngineFlags defines --engine and every engine's own flags.
func addEngineFlags(e *envFlags, cfg *serveConfig) {
	e.String(&cfg.Engine, "engine", engineDocker, "where sandboxes run: docker (containers on the local engine) or kubernetes (pods on a cluster; templates are still built by the local Docker engine)")
	for _, eng := range engines() {
		if eng.flags != nil {
			eng.flags(e, cfg)
		}
	}
}

// checkEngine validates --engine and what it implies.
func checkEngine(cfg serveConfig) error {
	eng, err := engineNamed(cfg.Engine)
	if err != nil {
		return err
	}
	return eng.check(cfg)
}

// engineTitle is the engine as the dashboard shows it.
func engineTitle(name string) string {
	eng, err := engineNamed(name)
	if err != nil {
		return engines()[0].title
	}
	return eng.title
}

// undo is what an engine's open made, to be closed in reverse: on its
// error, or by the close it returns.
type undo []func()

func (u *undo) push(f func()) { *u = append(*u, f) }

func (u undo) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// localDocker is the local Docker engine, which every engine builds
// templates with (and the Docker engine runs sandboxes on): its adapter
// and the network template builds run on.
type localDocker struct {
	rt          *docker.Runtime
	buildNet    string // the builds' Docker network; "" until ensureBuildNetwork
	buildBridge string // its bridge on the host, for the firewall
}

// openLocalDocker makes the local Docker engine's adapter with dc, to be
// closed by u; hint says what to do when that fails.
func openLocalDocker(dc docker.Config, hint string, u *undo) (localDocker, error) {
	rt, err := docker.New(dc)
	if err != nil {
		return localDocker{}, fmt.Errorf("%w (%s)", err, hint)
	}
	u.push(func() { rt.Close() })
	return localDocker{rt: rt}, nil
}

// ensureBuildNetwork makes the network template builds run on.
func (d *localDocker) ensureBuildNetwork(ctx context.Context) error {
	var err error
	if d.buildNet, d.buildBridge, err = d.rt.EnsureBuildNetwork(ctx); err != nil {
		return fmt.Errorf("template build network: %w (run \"warren doctor\")", err)
	}
	return nil
}

// dockerConfig is the local Docker engine's adapter configuration that
// every engine shares.
func dockerConfig(cfg serveConfig, log *slog.Logger) docker.Config {
	return docker.Config{AgentPath: cfg.AgentPath, Network: cfg.Network, Instance: cfg.Instance, Logger: log}
}

// agentDeps are the server's dependencies on sandboxes' agents, the
// same on every engine: Warren's agent client.
func agentDeps(log *slog.Logger) server.Deps {
	ac := agentclient.New()
	return server.Deps{Agent: ac, Tunnels: ac, Commands: ac, Terminals: ac, Screens: ac, Files: ac, Logger: log}
}
