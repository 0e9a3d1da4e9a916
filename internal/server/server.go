// Package server is what warren serve runs: it wires the store, secrets
// and workload identity, the template registry, volumes, events, the
// lifecycle manager, the proxy, the control-plane API and the dashboard
// onto one handler, serves it on the client ports (HTTP, and optionally
// HTTPS and DNS for the SDK's default URLs), and shuts it all down in
// order.
//
// It owns no engine, no store and no flags: the engine's parts (runtime,
// agent client, firewall, template builder) and the store come in Deps,
// made by cmd/warren from Docker and SQLite or PostgreSQL, or by a test
// from fakes, so this package links no engine library nor store driver;
// cmd/warren turns flags into a Config.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/api"
	"github.com/warrenhq/warren/internal/egress"
	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/httpguard"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/proxy"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/sso"
	"github.com/warrenhq/warren/internal/store"
	"github.com/warrenhq/warren/internal/template"
	"github.com/warrenhq/warren/internal/volume"
	"github.com/warrenhq/warren/internal/web"
)

// Config is what a Server serves with. cmd/warren fills it from warren
// serve's flags; the defaults named are theirs.
type Config struct {
	Addr    string // HTTP address; port 0 picks a free one (URL tells which)
	TLSAddr string // HTTPS address of the same handler (sdk.go); "" = none
	DNSAddr string // UDP address answering DNS for *.<Domain>; "" = none
	Domain  string // sandbox domain: <port>-<id>.<Domain>; required
	// StateDir holds the TLS CA, the keys of secrets, workload tokens and
	// volume tokens, and the volumes; created if missing. Required.
	StateDir string
	// SecretsKeyFile holds the key that seals secrets; "" =
	// <StateDir>/secrets.key, made on first start.
	SecretsKeyFile string
	// OIDCIssuer is the issuer URL of workload tokens; "" = the API's
	// URL (http://<listen address>).
	OIDCIssuer string
	// VolumesDir holds the volumes' directory trees; "" =
	// <StateDir>/volumes.
	VolumesDir string
	// VolumeSizeMB bounds each volume's content; 0 = no limit. With
	// Deps.VolumeClaims it is each claim's size (required).
	VolumeSizeMB int
	APIKey       string // accepted besides stored keys; "" = none
	// TemplateBuilds is how many template builds run at once; 0 = the
	// registry's default (2).
	TemplateBuilds int
	// ProxyDialTimeout bounds the proxy's reaching a sandbox's agent and
	// opening a tunnel to a port inside; 0 = the proxy's default (10s).
	ProxyDialTimeout time.Duration
	// EventsRetention is how long sandbox lifecycle events are kept;
	// 0 = the events service's default.
	EventsRetention time.Duration
	// WebhookTimeout bounds one webhook delivery attempt; 0 = the events
	// service's default.
	WebhookTimeout time.Duration
	// WebhookAllowPrivate lets webhooks target loopback, link-local,
	// private and this host's own addresses; default false.
	WebhookAllowPrivate bool
	// IdleTimeout closes a client's keep-alive connection idle this long
	// between requests; negative = never, 0 = net/http's default (never
	// beyond ReadTimeout, which is not set).
	IdleTimeout time.Duration
	// Conns caps each client's connections and paces request bodies, on
	// the HTTP and the HTTPS port alike; its Logger is the Server's.
	Conns     httpguard.Config
	Lifecycle lifecycle.Settings // validated by lifecycle.New
	// Info is what the dashboard's server view says of this server.
	Info web.ServerInfo
	// SSO is the dashboard's single sign-on; an empty Issuer = none.
	SSO sso.Config
	// SSORedirectURL is where the identity provider sends users back;
	// "" = the callback on the host the browser used (web.Config).
	SSORedirectURL string
}

// Deps are the engine-facing parts a Server works through, made by its
// caller: cmd/warren from Docker, tests from fakes.
type Deps struct {
	// Store keeps the server's records; required. Its caller closes it,
	// after Close.
	Store   store.Store
	Runtime sandbox.Runtime // required
	Agent   sandbox.Agent   // required
	Tunnels proxy.Tunneler  // required
	// Firewall enforces egress rules; nil = stored but not enforced. One
	// that takes an egress.Expander (the egress gateway) resolves rules'
	// placeholders with the server's secrets.
	Firewall sandbox.Firewall
	// CABundle is the CA every sandbox trusts, for the egress gateway's
	// interception; "" = none. A Firewall with a CA of its own in the
	// state dir (egressCA: the Kubernetes engine's) gives its CA instead.
	CABundle string
	// Builder builds templates; nil = no template registry, and so no
	// template API (tests without an engine).
	Builder template.Engine
	// Commands runs templates' start and ready commands in sandboxes.
	Commands lifecycle.CommandRunner
	// Terminals, Screens and Files serve the dashboard's terminals,
	// desktop screens and file browser; nil = none.
	Terminals web.Terminals
	Screens   web.Screens
	Files     web.Files
	// Checks are the dashboard server view's health checks; nil = none.
	Checks func(ctx context.Context) []web.Check
	// Leadership elects the replica that leads among several sharing the
	// store (replicas.go); nil = this server leads alone, from Open.
	Leadership Leadership
	// ForwardSecret is shared by the replicas, which prove with it that a
	// call is forwarded by one of them; required with Leadership.
	ForwardSecret string
	// LostLeadership is called when this replica stops leading other than
	// by Close: its leader's work must stop at once (cmd/warren ends the
	// process, which comes back as a follower). Required with Leadership.
	LostLeadership func()
	// VolumeClaims keeps the volumes' content in the cluster (the
	// Kubernetes engine's PersistentVolumeClaims), each of VolumeSizeMB;
	// nil = directories under VolumesDir.
	VolumeClaims volume.Claims
	Logger       *slog.Logger // nil = discard
}

// Server is warren serve's server. New makes it, Open starts it and
// returns once it listens, Close stops it; Done tells when its HTTP port
// stopped serving on its own.
type Server struct {
	cfg  Config
	deps Deps
	log  *slog.Logger

	st  store.Store
	sdk *sdkListeners
	url string

	http    *http.Server
	stopped chan struct{} // closed once http.Serve returned
	served  error         // what http.Serve returned; read after stopped

	closers []func() // what Open started, undone by Close in reverse

	// With Deps.Leadership: leading is set once this replica's leader's
	// work runs; leadMu serialises starting it with Close, which sets
	// closing so that it does not start after.
	leading  atomic.Bool
	leadMu   sync.Mutex
	closing  bool   // guarded by leadMu
	stepDown func() // StepDown's work, set once the election starts
	// leaderWait is how long a call waits for a leader; 0 = leaderWait.
	// Tests shorten it.
	leaderWait time.Duration
	draining   atomic.Bool // set by Drain
	idle       idleConns   // the HTTP port's idle connections, which Drain closes
	// drainIdle is how long a draining server leaves a connection idle;
	// 0 = drainIdle. Tests change it.
	drainIdle time.Duration
	// rp routes the calls of a replica among several (replicas.go); nil
	// = this server leads alone. Set by Open.
	rp *replicas
}

// New returns a Server; it does nothing until Open.
func New(cfg Config, deps Deps) *Server {
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, deps: deps, log: deps.Logger, stopped: make(chan struct{})}
}

// Open starts the template registry, events, the
// lifecycle manager and the listeners, and returns once the client ports
// listen. What it started runs until Close; if it fails, it has undone
// what it started. Open a Server once. ctx bounds the start and ends the background loops of
// the registry and the events service.
func (s *Server) Open(ctx context.Context) error {
	if err := s.open(ctx); err != nil {
		s.undo()
		s.url = ""
		return err
	}
	return nil
}

func (s *Server) open(ctx context.Context) error {
	cfg, deps, log := s.cfg, s.deps, s.log
	if deps.Store == nil || deps.Runtime == nil || deps.Agent == nil || deps.Tunnels == nil {
		return errors.New("server: Deps.Store, Runtime, Agent and Tunnels are required")
	}
	if deps.Leadership != nil && (deps.ForwardSecret == "" || deps.LostLeadership == nil) {
		return errors.New("server: Deps.ForwardSecret and LostLeadership are required with Leadership")
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	warnOpenStateDir(cfg.StateDir, log)
	st := deps.Store
	s.st = st
	shared, err := s.pullShared(ctx)
	if err != nil {
		return err
	}
	caBundle, err := loadEgressCA(cfg, deps)
	if err != nil {
		return err
	}
	// Listening first gives the address, which is the default issuer of
	// workload tokens, before anything is built; it is served last.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	s.onClose(func() { ln.Close() })
	s.url = "http://" + ln.Addr().String()
	secretsSvc, issuer, err := openSecrets(cfg, st, s.url, secretsChanged(deps.Firewall, log), shared)
	if err != nil {
		return err
	}
	if gw, ok := deps.Firewall.(interface{ SetExpander(egress.Expander) }); ok {
		gw.SetExpander(gatewaySecrets{svc: secretsSvc, log: logkey.For(log, "egress")})
	}

	// The election stops after what the leader runs, which Close undoes
	// first: the Lease is handed on once nothing of it runs here.
	election := s.startElection()
	tpl, err := s.openTemplates(ctx)
	if err != nil {
		return err
	}

	// Before the manager starts sandboxes: they bind volumes' mounted
	// filesystems.
	volDir := cfg.VolumesDir
	if volDir == "" {
		volDir = filepath.Join(cfg.StateDir, "volumes")
	}
	vols, err := volume.New(ctx, volume.Config{Store: st, Dir: volDir, KeyFile: filepath.Join(cfg.StateDir, "volume-token.key"),
		SizeLimitMB: cfg.VolumeSizeMB, Claims: deps.VolumeClaims, Logger: log, Limits: func(ctx context.Context, team string) (sandbox.Limits, error) {
			return sandbox.LimitsOf(ctx, st, team, cfg.Lifecycle.TeamLimits)
		}})
	if err != nil {
		return err
	}

	evs := events.New(events.Config{Store: st, Logger: log, Retention: cfg.EventsRetention, Timeout: cfg.WebhookTimeout,
		AllowPrivate: cfg.WebhookAllowPrivate})
	s.onClose(evs.Close)

	// The manager cuts the proxy's streams into sandboxes it stops, and
	// the proxy routes through the manager: the streams are made first.
	streams := proxy.NewStreams(log)
	lc := lifecycle.Deps{Runtime: deps.Runtime, Agent: deps.Agent, Store: st, Logger: log, Firewall: deps.Firewall, Events: evs,
		CABundle: caBundle, OnStop: streams.Disconnect}
	if tpl != nil {
		lc.Templates, lc.Commands = tpl, deps.Commands
	}
	var rp *replicas
	if deps.Leadership != nil {
		// The manager is made with rp's resume, and rp with the manager.
		rp = newReplicas(deps.Leadership, deps.ForwardSecret, cfg.Domain, st, &s.leading, log)
		if s.leaderWait > 0 {
			rp.wait = s.leaderWait
		}
		lc.Resume = rp.resume
		s.rp = rp
	}
	mgr, err := lifecycle.New(lc, cfg.Lifecycle)
	if err != nil {
		return err
	}
	if tpl != nil {
		tpl.BeforeRemoveImage(mgr.ReleasePool)
	}
	px, err := proxy.New(proxy.Config{Domain: cfg.Domain, Router: mgr, Tunnels: deps.Tunnels, Streams: streams,
		DialTimeout: cfg.ProxyDialTimeout, Logger: log})
	if err != nil {
		return err
	}
	s.onClose(func() { mgr.Close() })
	leaderWork := func(ctx context.Context) error {
		if err := mgr.Lead(ctx); err != nil {
			return err
		}
		evs.Start(ctx)
		if tpl != nil {
			return tpl.Start(ctx)
		}
		return nil
	}
	if rp == nil {
		if err := leaderWork(ctx); err != nil {
			return err
		}
	} else {
		mgr.Follow()
		rp.mgr = mgr
	}

	var extra []string
	if cfg.APIKey != "" {
		extra = append(extra, cfg.APIKey)
	}
	control := api.New(api.Config{Manager: mgr, Keys: st, ExtraKeys: extra, Templates: tpl, Events: evs, Volumes: vols,
		Secrets: secretsSvc, Identity: issuer, Logger: log})
	dashCfg := web.Config{Manager: mgr, Store: st, ExtraKeys: extra, Templates: tpl, Events: evs, Terminals: deps.Terminals,
		Screens: deps.Screens, Files: deps.Files, Volumes: vols, Info: cfg.Info, Checks: deps.Checks, SSORedirectURL: cfg.SSORedirectURL, Logger: log}
	if cfg.SSO.Issuer != "" {
		p, err := sso.New(cfg.SSO)
		if err != nil {
			return fmt.Errorf("single sign-on: %w", err)
		}
		dashCfg.SSO = p
	}
	dash := web.New(dashCfg)
	h := route(cfg.Domain, px, vols.Handler(), dash, control)
	if rp != nil {
		h = rp.handler(h)
	}
	if err := s.serve(ctx, ln, h); err != nil {
		return err
	}
	if shared != nil {
		if err := shared.push(ctx); err != nil {
			return err
		}
	}
	if rp != nil {
		election(leaderWork, rp.settle, func() {
			mgr.Close()
			mgr.Follow()
			evs.Close()
			if tpl != nil {
				tpl.Close()
			}
		})
	}
	return nil
}

// pullShared takes the keys and CA the replicas share from the store into
// the state dir, before anything loads them (shared.go); nil without
// Leadership, or on a store that shares no files.
func (s *Server) pullShared(ctx context.Context) (*sharedState, error) {
	if s.deps.Leadership == nil {
		return nil, nil
	}
	shared, err := newSharedState(s.cfg, s.st, s.deps.ForwardSecret)
	if err != nil || shared == nil {
		return nil, err
	}
	// Replicas starting together take turns from here to push: the
	// first makes the files, the others load them.
	unlock, err := shared.st.LockSharedFiles(ctx)
	if err != nil {
		return nil, err
	}
	shared.unlock = sync.OnceFunc(unlock)
	s.onClose(shared.unlock)
	if err := shared.pull(ctx); err != nil {
		return nil, fmt.Errorf("the replicas' shared keys and CA: %w", err)
	}
	return shared, nil
}

// openTemplates starts the template registry, with the built-in
// templates' images; nil without a Builder.
func (s *Server) openTemplates(ctx context.Context) (*template.Registry, error) {
	if s.deps.Builder == nil {
		return nil, nil
	}
	lc := s.cfg.Lifecycle
	builtins := map[string]template.Source{
		lifecycle.BaseTemplate:            {Image: lc.BaseImage},
		lifecycle.CodeInterpreterTemplate: {Image: lc.CodeInterpreterImage, AgentArgs: lifecycle.CodeInterpreterArgs()},
		lifecycle.MCPGatewayTemplate:      {Image: lc.MCPGatewayImage},
		lifecycle.DesktopTemplate:         {Image: lc.DesktopImage, AgentArgs: lifecycle.DesktopArgs()},
	}
	tpl, err := template.New(template.Config{Store: s.st, Engine: s.deps.Builder, Dir: s.cfg.StateDir,
		BaseImage: lc.BaseImage, Builtins: builtins, Snapshots: s.st,
		MaxConcurrentBuilds: s.cfg.TemplateBuilds, Logger: s.log})
	if err != nil {
		return nil, err
	}
	s.onClose(func() { tpl.Close() })
	return tpl, nil
}

// startElection returns what starts campaigning for the Lease, with
// Deps.Leadership. Close stops it last, and StepDown (which Close calls
// first) stops the leader's work and hands the Lease on.
func (s *Server) startElection() func(work func(context.Context) error, settle, stopWork func()) {
	if s.deps.Leadership == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	started := false
	release := func() {
		cancel()
		if started {
			<-done
		}
	}
	s.onClose(release)
	return func(work func(context.Context) error, settle, stopWork func()) {
		started = true
		go func() {
			defer close(done)
			s.deps.Leadership.Run(ctx, func(lctx context.Context) { s.lead(lctx, work) }, func() {
				if ctx.Err() == nil {
					s.deps.LostLeadership()
				}
			})
		}()
		s.stepDown = sync.OnceFunc(func() {
			s.leadMu.Lock()
			s.closing = true
			led := s.leading.Swap(false)
			s.leadMu.Unlock()
			if led {
				settle()
				stopWork()
			}
			release()
		})
		s.onClose(s.StepDown)
	}
}

// StepDown stops a leading replica's leader's work (the manager's loops,
// webhook delivery, builds) and hands the Lease on at once, so that the
// next leader need not wait for it to run out; the replica serves on as a
// follower until Close, which steps down first anyway. A stopping
// replica calls it before anything else: a pod being deleted gets a
// couple of seconds, not the whole of its shutdown. Without Leadership,
// or not leading, it only keeps the replica from leading.
func (s *Server) StepDown() {
	if s.stepDown != nil {
		s.stepDown()
	}
}

// lead starts the leader's work once this replica holds the Lease: the
// manager adopts the engine's sandboxes and re-arms their timers from the
// store, webhook deliveries and retention resume, interrupted builds are
// closed. A replica that cannot start it gives the Lease up.
func (s *Server) lead(ctx context.Context, work func(context.Context) error) {
	s.leadMu.Lock()
	defer s.leadMu.Unlock()
	if s.closing {
		return
	}
	start := time.Now()
	if err := work(ctx); err != nil {
		s.log.Error("cannot start leading", "err", err)
		s.deps.LostLeadership()
		return
	}
	s.leading.Store(true)
	s.log.Info("leading: the lifecycle's timers, pools, reconcile, webhook delivery and retention run here",
		"took", time.Since(start).Round(time.Millisecond))
}

// serve starts serving h on ln and the SDK's ports.
func (s *Server) serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	h = s.drainable(h)
	conns := s.cfg.Conns
	conns.Logger = s.log
	guard := httpguard.New(conns)
	ln = guard.Listen(ln)
	sdk, err := listenSDK(ctx, s.cfg, guard, h, s.log)
	if err != nil {
		return err
	}
	s.onClose(sdk.Close)
	s.sdk = sdk
	s.http = newHTTPServer(s.cfg, guard, h, s.log)
	s.http.ConnState = s.idle.track
	go func() {
		s.served = s.http.Serve(ln)
		close(s.stopped)
	}()
	s.onClose(s.shutdown)
	return nil
}

// shutdown stops the HTTP port, cutting open streams after a short grace,
// and waits for it.
func (s *Server) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.http.Shutdown(ctx); err != nil {
		s.http.Close() // open streams do not hold the shutdown up
	}
	<-s.stopped
}

// Drain has every answer from now on close its connection, so that
// clients open their next connections elsewhere (another replica behind
// the Service) while the server goes on serving until Close, and closes
// the HTTP port's connections once idle for drainIdle (drain.go). A
// replica among several that is about to be killed refuses from then on
// the calls that need the leader (replicas.go's checkForced), and leaves
// its idle connections open: closing one cuts the call its client sends
// on it at that moment (a create cut so, 0.5 s after a follower's forced
// deletion, failed the failover e2e's run), while the next call on it is
// now refused with 429, which the SDK sends again elsewhere, or is one
// that is answered in milliseconds and closes the connection.
func (s *Server) Drain() {
	if s.draining.Swap(true) || s.http == nil {
		return
	}
	go func() {
		if s.rp != nil && s.rp.checkForced() {
			return
		}
		s.idle.closeWhileDraining(cmp.Or(s.drainIdle, drainIdle), s.stopped)
	}()
}

// drainable has h's answers close their connections once Drain is called.
func (s *Server) drainable(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// URL is the HTTP port's URL, as http://host:port; "" before Open.
func (s *Server) URL() string { return s.url }

// Done is closed when the HTTP port has stopped serving: by Close, or on
// its own, when Close says why.
func (s *Server) Done() <-chan struct{} { return s.stopped }

// Close stops everything Open started, the client ports first, and
// returns why the HTTP port stopped if it stopped on its own.
func (s *Server) Close() error {
	s.undo()
	if s.http == nil || errors.Is(s.served, http.ErrServerClosed) {
		return nil
	}
	return s.served
}

// onClose has Close undo f, after what was started since.
func (s *Server) onClose(f func()) { s.closers = append(s.closers, f) }

func (s *Server) undo() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// PrintHello tells the operator how to point an SDK at the server: on
// stdout the settings, on stderr that no API key exists yet when so.
func (s *Server) PrintHello(ctx context.Context, stdout, stderr io.Writer) {
	url, key := s.url, s.cfg.APIKey
	if key == "" {
		key = "<a key from: warren keys create>"
		if keys, err := s.st.ListAPIKeys(ctx); err == nil && len(keys) == 0 {
			fmt.Fprintln(stderr, "warren: no API keys yet; create one with: warren keys create")
		}
	}
	fmt.Fprintf(stdout, "Warren is serving on %s (state in %s).\nPoint the E2B SDK at it with:\n"+
		"  export E2B_API_URL=%s\n  export E2B_SANDBOX_URL=%s\n  export E2B_DOMAIN=%s\n  export E2B_API_KEY=%s\n",
		url, s.cfg.StateDir, url, url, s.cfg.Domain, key)
	s.sdk.printHello(stdout, s.cfg.Domain)
}
