package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/identity"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/proxy"
	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/server"
	"github.com/warrenhq/warren/internal/template"
	"github.com/warrenhq/warren/internal/web"
)

// serveConfig is what warren serve runs with, from flags and WARREN_*
// environment variables: the server's Config, and how to make the engine
// it works through.
type serveConfig struct {
	server.Config
	AgentPath string // the warren-agent binary mounted into sandboxes
	LogFormat string // "text" or "json"
	Network   string // Docker network of sandboxes, created if missing
	Firewall  string // "iptables" (isolation and egress rules) or "off"
	// EgressDNS lists the resolvers (IP:port) the firewall's egress
	// server forwards sandboxes' queries to; none = those of
	// /etc/resolv.conf.
	EgressDNS []string
	// EgressTrustCA lists PEM files of CAs the egress gateway trusts, with
	// the system's, for the hosts whose TLS it intercepts.
	EgressTrustCA []string
	// EgressProxyPrivate allows egress proxies at private and loopback
	// addresses.
	EgressProxyPrivate bool
	// Instance tells this server's containers and firewall chains from
	// those of other servers on the same Docker engine. Default
	// sandbox.DefaultInstance.
	Instance string
	// Runtime is what sandboxes run under: "runc" (default) or "gvisor".
	Runtime string
	// GVisorName is the engine's name for runsc (daemon.json "runtimes").
	GVisorName string
	// Engine is where sandboxes run, a row of engines(); Kube its
	// settings for engineKubernetes.
	Engine string
	Kube   kubeConfig
	// Store is the URL of the store, a row of stores(); "" = the SQLite
	// file in StateDir.
	Store string
	// ShutdownDelay is how long a stopping server goes on serving before
	// it closes its ports, while the cluster's Service stops sending it
	// connections; 0 = none.
	ShutdownDelay time.Duration
}

func (m *Main) runServe(ctx context.Context, args []string) error {
	cfg, err := m.parseServe(args)
	if err != nil {
		return err
	}
	log := m.logger(cfg.LogFormat)
	eng, err := engineNamed(cfg.Engine)
	if err != nil {
		return err
	}
	logStore(log, cfg.Store, cfg.StateDir)
	st, closeStore, err := openStore(ctx, cfg.Store, cfg.StateDir)
	if err != nil {
		return err
	}
	defer closeStore()
	deps, closeEngine, err := eng.open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeEngine()
	deps.Store = st
	return m.serve(ctx, newServer(cfg, deps), cfg.ShutdownDelay, log)
}

// newServer makes warren serve's server on an engine's parts, with the
// dashboard's view of the server and its checks from cfg.
func newServer(cfg serveConfig, deps server.Deps) *server.Server {
	cfg.Info = serverInfo(cfg)
	deps.Checks = serverChecks(cfg, deps.Runtime)
	return server.New(cfg.Config, deps)
}

// serverInfo is what the dashboard's server view says of the server.
func serverInfo(cfg serveConfig) web.ServerInfo {
	return web.ServerInfo{Version: versionString(), Engine: engineTitle(cfg.Engine), StateDir: cfg.StateDir, Firewall: cfg.Firewall, Domain: cfg.Domain}
}

// serve opens srv, tells the operator how to use it, and runs it until ctx
// ends or its port fails.
func (m *Main) serve(ctx context.Context, srv *server.Server, delay time.Duration, log *slog.Logger) error {
	if err := srv.Open(ctx); err != nil {
		return err
	}
	srv.PrintHello(ctx, m.Stdout, m.Stderr)
	select {
	case <-srv.Done():
	case <-ctx.Done():
		log.Info("shutting down", "serving_for", delay)
		// Draining first: from now each answer closes its connection, so
		// the client's next call opens one to another replica (a pod
		// force-deleted is killed ~2 s after this signal, and a call sent
		// on a connection kept here would be cut); then the Lease is
		// handed on, after the changes this replica serves as the leader.
		srv.Drain()
		srv.StepDown()
		select {
		case <-srv.Done():
		case <-time.After(delay):
		}
	}
	return srv.Close()
}

// parseEgressDNS parses --egress-dns: IP:port resolvers, comma-separated.
func parseEgressDNS(list string) ([]string, error) {
	var out []string
	for r := range strings.SplitSeq(list, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		if _, err := netip.ParseAddrPort(r); err != nil {
			return nil, usageError{fmt.Sprintf("--egress-dns=%q: want IP:port resolvers, comma-separated (e.g. 10.0.0.2:53)", list)}
		}
		out = append(out, r)
	}
	return out, nil
}

// logger returns JSON logs, or text when format is "text" or, by
// default, when stderr is a terminal.
func (m *Main) logger(format string) *slog.Logger {
	if format == "" {
		format = "json"
		if f, ok := m.Stderr.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(m.Stderr, nil))
	}
	return slog.New(slog.NewJSONHandler(m.Stderr, nil))
}

// defaultStateDir is $XDG_DATA_HOME/warren, else ~/.local/share/warren.
func (m *Main) defaultStateDir() string {
	if d := m.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "warren")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "warren")
	}
	return "warren-state"
}

// defaultAgentPath is warren-agent beside the running warren binary.
func defaultAgentPath() string {
	exe, err := os.Executable()
	if err != nil {
		return "warren-agent"
	}
	return filepath.Join(filepath.Dir(exe), "warren-agent")
}

// envFlags defines flags whose defaults come from WARREN_<NAME>
// environment variables, named after the flag.
type envFlags struct {
	fs     *flag.FlagSet
	getenv func(string) string
	err    error // the first unparsable environment value
}

func envName(flagName string) string {
	return "WARREN_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (e *envFlags) usage(usage, name string) string {
	return usage + " (env " + envName(name) + ")"
}

func (e *envFlags) String(p *string, name, def, usage string) {
	if v := e.getenv(envName(name)); v != "" {
		def = v
	}
	e.fs.StringVar(p, name, def, e.usage(usage, name))
}

func (e *envFlags) Bool(p *bool, name string, def bool, usage string) {
	if v := e.getenv(envName(name)); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil && e.err == nil {
			e.err = usageError{fmt.Sprintf("%s=%q is not a boolean", envName(name), v)}
		}
		def = b
	}
	e.fs.BoolVar(p, name, def, e.usage(usage, name))
}

func (e *envFlags) Int(p *int, name string, def int, usage string) {
	if v := e.getenv(envName(name)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil && e.err == nil {
			e.err = usageError{fmt.Sprintf("%s=%q is not an integer", envName(name), v)}
		}
		def = n
	}
	e.fs.IntVar(p, name, def, e.usage(usage, name))
}

func (e *envFlags) Float(p *float64, name string, def float64, usage string) {
	if v := e.getenv(envName(name)); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil && e.err == nil {
			e.err = usageError{fmt.Sprintf("%s=%q is not a number", envName(name), v)}
		}
		def = f
	}
	e.fs.Float64Var(p, name, def, e.usage(usage, name))
}

// PoolSize is an Int that also takes "auto" (lifecycle.WarmPoolAuto).
func (e *envFlags) PoolSize(p *int, name string, def int, usage string) {
	*p = def
	v := poolSize{p}
	if env := e.getenv(envName(name)); env != "" {
		if err := v.Set(env); err != nil && e.err == nil {
			e.err = usageError{fmt.Sprintf("%s=%q: %s", envName(name), env, err)}
		}
	}
	e.fs.Var(v, name, e.usage(usage, name))
}

// poolSize is a flag.Value of a pool size: a number, or auto.
type poolSize struct{ p *int }

func (v poolSize) String() string {
	if v.p == nil || *v.p == lifecycle.WarmPoolAuto {
		return "auto"
	}
	return strconv.Itoa(*v.p)
}

func (v poolSize) Set(s string) error {
	if s == "auto" {
		*v.p = lifecycle.WarmPoolAuto
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return errors.New("want a size (0: no pool) or auto")
	}
	*v.p = n
	return nil
}

func (e *envFlags) Duration(p *time.Duration, name string, def time.Duration, usage string) {
	if v := e.getenv(envName(name)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil && e.err == nil {
			e.err = usageError{fmt.Sprintf("%s=%q is not a duration", envName(name), v)}
		}
		def = d
	}
	e.fs.DurationVar(p, name, def, e.usage(usage, name))
}

// flagGiven says whether the flag name was given, on the command line
// or in its environment variable.
func flagGiven(fs *flag.FlagSet, e *envFlags, name string) bool {
	given := e.getenv(envName(name)) != ""
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// sharedServeFlags defines the flags of serve that doctor takes too, for
// it checks what they name: the port, the state dir, the agent, the
// images, the firewall and the runtime.
func (m *Main) sharedServeFlags(e *envFlags, cfg *serveConfig) {
	d := lifecycle.DefaultSettings()
	e.String(&cfg.Addr, "addr", "127.0.0.1:3000", "address to listen on")
	e.String(&cfg.StateDir, "state-dir", m.defaultStateDir(), "directory of Warren's database")
	e.String(&cfg.AgentPath, "agent", defaultAgentPath(), "path of the warren-agent binary mounted into sandboxes")
	e.String(&cfg.Firewall, "firewall", "iptables", "iptables: isolate sandboxes from the host and each other's agent and enforce egress rules, and keep template builds from the host and sandboxes (needs root; with --engine kubernetes only the builds: sandbox pods isolate themselves and the node agents enforce egress settings); off: none of it, and egress rules are refused (with --engine kubernetes: the local builds go unguarded; pods and egress rules are as before)")
	e.String(&cfg.Runtime, "runtime", string(sandbox.RuntimeRunc), "what sandboxes run under: runc, or gvisor (stronger isolation; "+
		"frozen sandboxes are demoted to checkpointed, keeping their memory on disk; set up with: warren runtime setup gvisor)")
	e.String(&cfg.GVisorName, "gvisor-runtime-name", docker.DefaultGVisorRuntime, "the Docker engine's name of the gVisor runtime (its daemon.json \"runtimes\" key)")
	e.String(&cfg.Lifecycle.BaseImage, "base-image", d.BaseImage, `image of the "base" template`)
	e.String(&cfg.Lifecycle.CodeInterpreterImage, "code-interpreter-image", d.CodeInterpreterImage, `image of the "code-interpreter-v1" template (warren image build code-interpreter)`)
	e.String(&cfg.Lifecycle.MCPGatewayImage, "mcp-gateway-image", d.MCPGatewayImage, `image of the "mcp-gateway" template, where the SDK's Sandbox.create({ mcp }) runs (warren image build mcp-gateway)`)
	e.String(&cfg.Lifecycle.DesktopImage, "desktop-image", d.DesktopImage, `image of the "desktop" template, @e2b/desktop's (warren image build desktop)`)
}

func (m *Main) parseServe(args []string) (serveConfig, error) {
	fs := m.newFlagSet("serve", "warren serve [flags]",
		"Serve E2B's control-plane API and the sandbox proxy on one port, keeping sandboxes as\n"+
			"containers on the local Docker engine. Every flag can also be set with the WARREN_*\n"+
			"environment variable shown beside it; WARREN_API_KEY adds an accepted API key.")
	e := &envFlags{fs: fs, getenv: m.Getenv}
	// The lifecycle settings that are no flags keep their defaults.
	cfg := serveConfig{Config: server.Config{Lifecycle: lifecycle.DefaultSettings()}}
	m.sharedServeFlags(e, &cfg)
	d, l := cfg.Lifecycle, &cfg.Lifecycle
	addStoreFlag(e, &cfg.Store)
	e.String(&cfg.TLSAddr, "tls-addr", "", "also serve over HTTPS here (e.g. 127.0.0.1:3443), with a wildcard certificate for *.<domain> from a CA kept in <state-dir>/tls; needs a domain of two labels or more")
	e.String(&cfg.DNSAddr, "dns-addr", "", "answer DNS (UDP) for *.<domain> with 127.0.0.1 here (e.g. 127.0.0.1:5353)")
	e.String(&cfg.Domain, "domain", "localhost", "sandbox domain: sandbox hosts are <port>-<id>.<domain>")
	e.String(&cfg.SecretsKeyFile, "secrets-key-file", "", "file of the key that encrypts secrets at rest, 64 hexadecimal digits (openssl rand -hex 32); default <state-dir>/secrets.key, made on first start")
	e.String(&cfg.OIDCIssuer, "oidc-issuer", "", "issuer URL of sandboxes' workload tokens, where clouds fetch /.well-known/openid-configuration and /.well-known/jwks.json (default: http://<addr>)")
	e.String(&cfg.VolumesDir, "volumes-dir", "", "directory of the volumes' content (default: <state-dir>/volumes)")
	e.Int(&cfg.VolumeSizeMB, "volume-size-mb", 0, "size of each volume made, in MiB: its own ext4 filesystem on a loop device, so a write past it fails inside sandboxes (ENOSPC) and through the content API (413); needs loop devices and mkfs.ext4; 0: a plain directory, no limit")
	e.String(&cfg.LogFormat, "log-format", "", "text or json (default: text on a terminal, else json)")
	e.String(&cfg.Network, "network", docker.DefaultNetwork, "Docker network of sandboxes (a bridge, created if missing)")
	var egressDNS string
	e.String(&egressDNS, "egress-dns", "", "resolvers (IP:port, comma-separated) that answer the DNS of sandboxes with domains in allowOut (default: the nameservers of /etc/resolv.conf)")
	e.Bool(&cfg.EgressProxyPrivate, "egress-proxy-private", true, "allow network.egressProxy at private, loopback and link-local addresses (self-hosted networks); false: only public ones, checked at create and whenever the proxy's name is resolved")
	var egressTrust string
	e.String(&egressTrust, "egress-trust-ca", "", "PEM files (comma-separated) of CAs the egress gateway trusts, besides the system's, when it opens its own TLS to a host whose requests network.rules rewrite")
	e.String(&cfg.Instance, "instance", sandbox.DefaultInstance, "this server's name on the Docker engine: the value of the dev.warren.managed label on its containers, "+
		"the only ones it adopts or removes, and the tag of its iptables chains; servers sharing one engine need different values")
	e.Int(&cfg.TemplateBuilds, "template-builds", template.DefaultMaxConcurrentBuilds, "template builds run at once; more wait in a queue")
	e.Duration(&cfg.ShutdownDelay, "shutdown-delay", 0, "on SIGTERM, go on serving this long before closing the ports (in a cluster: while the Service stops sending connections here)")
	e.Duration(&cfg.EventsRetention, "events-retention", events.DefaultRetention, "how long sandbox lifecycle events (GET /events/sandboxes, webhooks) are kept")
	e.Duration(&cfg.WebhookTimeout, "webhook-timeout", events.DefaultTimeout, "time limit of one webhook delivery attempt; a failed one is retried with backoff")
	e.Bool(&cfg.WebhookAllowPrivate, "webhook-allow-private", false, "let webhooks target loopback, link-local, private and this host's own addresses "+
		"(checked on the address of every delivery's connection); false: such URLs are refused, so no API key can reach the server's own network through a webhook")
	e.Bool(&l.PauseToDisk, "pause-to-disk", false, "under gvisor, a pause that keeps memory checkpoints the sandbox to disk at once instead of freezing it (no RAM held; resume takes a restore)")
	e.Duration(&l.CheckpointMaxAge, "checkpoint-max-age", d.CheckpointMaxAge, "delete checkpoints of sandboxes paused this long; they become stopped (negative: never)")
	e.Int(&l.CPUCount, "cpu-count", d.CPUCount, "CPUs per sandbox")
	e.Int(&l.MemoryMB, "memory-mb", d.MemoryMB, "memory per sandbox in MiB")
	e.Int(&l.MaxCPUCount, "max-cpu-count", d.MaxCPUCount, "most CPUs one sandbox gets: a template asking for more is refused, one built with more is held to it; by default this machine's CPUs")
	e.Int(&l.MaxMemoryMB, "max-memory-mb", d.MaxMemoryMB, "most memory in MiB one sandbox gets: a template asking for more is refused, one built with more is held to it; "+
		"by default half of this machine's memory (MemTotal), rounded down to a multiple of 128")
	e.Int(&l.ServerMemoryMB, "server-memory-mb", d.ServerMemoryMB, "MiB of memory the running and frozen sandboxes of every team may reserve in all (each its --memory-mb or its template's): "+
		"a create past it finds the server full and is answered 503 with Retry-After before anything starts; by default this machine's memory (MemTotal), "+
		"with --engine kubernetes none; 0: no limit")
	e.Int(&l.DiskSizeMB, "disk-size-mb", d.DiskSizeMB, "disk size per sandbox in MiB: reported to clients, and enforced where the engine's storage has quotas (overlay2 on xfs with pquota)")
	e.Int(&l.PidsLimit, "pids-limit", d.PidsLimit, "processes per sandbox (negative: no limit)")
	e.PoolSize(&l.WarmPool, "warm-pool", d.WarmPool, `started containers of the "base" template kept ready to claim: a size (0: no pool), `+
		`or auto: at least 2, as many as the largest burst of creates of the last 5 minutes asked for, and a pool learned the same way for every other template in use`)
	e.PoolSize(&l.WarmPoolCodeInterpreter, "warm-pool-code-interpreter", d.WarmPoolCodeInterpreter, `started containers of the "code-interpreter-v1" template kept ready to claim, `+
		`their python and javascript kernels up, about 75 MiB of RAM each: a size (0: no pool; none while its image is not built), or auto (at least 1, grown by bursts)`)
	e.Int(&l.WarmPoolMemoryMB, "warm-pool-memory-mb", d.WarmPoolMemoryMB, "MiB of memory the auto-sized warm pools may hold beyond their floors; by default 1/16 of this machine's memory (MemTotal)")
	e.Duration(&l.MaxTimeout, "max-timeout", d.MaxTimeout, "longest sandbox timeout a client may ask for")
	e.Duration(&l.InitTimeout, "init-timeout", d.InitTimeout, "how long to wait for a sandbox's agent")
	e.Duration(&cfg.ProxyDialTimeout, "proxy-dial-timeout", proxy.DefaultDialTimeout, "how long the proxy tries to reach a sandbox's agent, or a port inside through it, before answering 502")
	e.Duration(&l.ReadyTimeout, "ready-timeout", d.ReadyTimeout, "how long a template's ready command may keep failing before the create fails")
	e.Duration(&l.FreezeMaxAge, "freeze-max-age", d.FreezeMaxAge, "stop frozen sandboxes after this long (negative: never)")
	e.Int(&l.MaxFrozen, "max-frozen", d.MaxFrozen, "most frozen sandboxes; the oldest beyond are stopped (negative: no cap)")
	e.Duration(&l.StoppedMaxAge, "stopped-max-age", d.StoppedMaxAge, "remove sandboxes paused (stopped) this long (negative: never)")
	e.Duration(&l.KilledRetention, "killed-retention", d.KilledRetention, "keep records and logs of killed sandboxes this long")
	e.Duration(&l.MetricsInterval, "metrics-interval", d.MetricsInterval, "how often running sandboxes' metrics are sampled")
	e.Int(&l.MetricsHistory, "metrics-history", d.MetricsHistory, "newest metric samples kept per sandbox at full resolution; older ones are kept one a minute, beyond a day one per 10 minutes")
	e.Duration(&l.ReconcileInterval, "reconcile-interval", d.ReconcileInterval, "how often the engine is checked against the store (besides its events, which are followed as they come)")
	t := &l.TeamLimits
	e.Int(&t.MaxSandboxes, "team-max-sandboxes", 0, "sandboxes a team may have running or frozen at once, unless `warren teams set` says otherwise for it (0: no limit)")
	e.Int(&t.MaxVCPUs, "team-max-vcpus", 0, "vCPUs a team's running and frozen sandboxes may have in all (0: no limit)")
	e.Int(&t.MaxMemoryMB, "team-max-memory-mb", 0, "MiB of memory a team's running and frozen sandboxes may have in all (0: no limit)")
	e.Int(&t.MaxDiskMB, "team-max-disk-mb", 0, "MiB of disk (--disk-size-mb each) a team's running and frozen sandboxes may have in all (0: no limit)")
	e.Float(&t.MaxCreatesPerSecond, "team-max-creates-per-second", 0, "sandboxes a team may create a second, forks included; a burst of one second's worth passes (0: no limit)")
	e.Int(&t.MaxVolumes, "team-max-volumes", 0, "volumes a team may have (0: no limit)")
	e.Int(&t.MaxVolumeMB, "team-max-volume-mb", 0, "MiB a team's volumes may have in all, --volume-size-mb each (0: no limit)")
	e.Duration(&cfg.IdleTimeout, "idle-timeout", 60*time.Second, "close a client's keep-alive connection after this long without a request; a response in progress, however silent, is not idle (negative: never)")
	e.Duration(&cfg.Conns.BodyTimeout, "body-timeout", 30*time.Second, "cut a request body, answering 408, when --body-min-bytes of it take longer than this to arrive; "+
		"time the server is slow to take it does not count, and a body sent at a real pace passes however big (negative: no minimum pace)")
	var bodyMinBytes int
	e.Int(&bodyMinBytes, "body-min-bytes", 16<<10, "bytes of a request body that must arrive within each --body-timeout")
	e.Int(&cfg.Conns.MaxConnsPerClient, "max-conns-per-client", 1024, "connections one client address (an IPv6 /64) may hold open at once; beyond, a connection is answered 429 and closed. "+
		"The SDK opens one per request in flight and per open stream; clients behind one proxy or NAT share an address (negative: no cap)")
	sso := addSSOFlags(e, &cfg)
	addEngineFlags(e, &cfg)
	if err := parseFlags(fs, args); err != nil {
		return serveConfig{}, err
	}
	if e.err != nil {
		return serveConfig{}, e.err
	}
	if fs.NArg() > 0 {
		return serveConfig{}, usageError{fmt.Sprintf("serve takes no arguments, got %q", fs.Args())}
	}
	if cfg.Engine == engineKubernetes && !flagGiven(fs, e, "server-memory-mb") {
		l.ServerMemoryMB = 0 // the cluster's nodes hold the sandboxes, not this machine
	}
	if err := checkEngine(cfg); err != nil {
		return serveConfig{}, err
	}
	if _, err := storeFor(cfg.Store); err != nil {
		return serveConfig{}, err
	}
	if cfg.Firewall != "iptables" && cfg.Firewall != "off" {
		return serveConfig{}, usageError{fmt.Sprintf("--firewall=%q: want iptables or off", cfg.Firewall)}
	}
	rt, err := sandbox.ParseOCIRuntime(cfg.Runtime)
	if err != nil {
		return serveConfig{}, usageError{"--runtime: " + sandbox.Message(err)}
	}
	l.SandboxRuntime = rt
	if cfg.EgressDNS, err = parseEgressDNS(egressDNS); err != nil {
		return serveConfig{}, err
	}
	cfg.EgressTrustCA = parseFileList(egressTrust)
	if cfg.Instance == "" {
		return serveConfig{}, usageError{"--instance must not be empty"}
	}
	if cfg.OIDCIssuer != "" {
		if _, err := identity.ParseIssuer(cfg.OIDCIssuer); err != nil {
			return serveConfig{}, usageError{"--oidc-issuer: " + err.Error()}
		}
	}
	if err := sso.finish(&cfg); err != nil {
		return serveConfig{}, err
	}
	if cfg.LogFormat != "" && cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		return serveConfig{}, usageError{fmt.Sprintf("--log-format must be text or json, not %q", cfg.LogFormat)}
	}
	// The lifecycle's setting names are the flags' names.
	var bad *lifecycle.SettingError
	if err := l.Validate(); errors.As(err, &bad) {
		return serveConfig{}, usageError{"--" + bad.Name + " " + bad.Problem}
	} else if err != nil {
		return serveConfig{}, err
	}
	if cfg.ProxyDialTimeout <= 0 {
		return serveConfig{}, usageError{"--proxy-dial-timeout must be positive"}
	}
	for name, v := range map[string]int64{"idle-timeout": int64(cfg.IdleTimeout), "body-timeout": int64(cfg.Conns.BodyTimeout),
		"max-conns-per-client": int64(cfg.Conns.MaxConnsPerClient)} {
		if v == 0 {
			return serveConfig{}, usageError{fmt.Sprintf("--%s must not be 0: give a positive value, or a negative one for never (no limit)", name)}
		}
	}
	if bodyMinBytes <= 0 {
		return serveConfig{}, usageError{"--body-min-bytes must be positive"}
	}
	cfg.Conns.BodyMinBytes = int64(bodyMinBytes)
	cfg.APIKey = m.Getenv("WARREN_API_KEY")
	if cfg.APIKey != "" && !sandbox.ValidAPIKey(cfg.APIKey) {
		return serveConfig{}, usageError{"WARREN_API_KEY must be e2b_ followed by lowercase hex digits (make one with: warren keys create)"}
	}
	return cfg, nil
}
