// Command warren-agent is the agent inside every Warren sandbox, wire
// compatible with E2B's envd 0.6. It is one static binary, mounted
// read-only into any image and run as the container's entrypoint, as root.
// As PID 1 it splits in two: a tiny init that reaps zombies and forwards
// signals, and the agent proper (see reaper.go). The agent prepares the
// image (the default user, E2B's marker file) and serves port 49983; with
// -code-interpreter it also serves the code interpreter on port 49999.
//
//	CGO_ENABLED=0 go build -o warren-agent ./cmd/warren-agent
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"github.com/warrenhq/warren/internal/agent/files"
	"github.com/warrenhq/warren/internal/agent/filesystem"
	"github.com/warrenhq/warren/internal/agent/limitguard"
	"github.com/warrenhq/warren/internal/agent/process"
	"github.com/warrenhq/warren/internal/agent/server"
	"github.com/warrenhq/warren/internal/agent/state"
)

// secretEnv carries the tunnel secret from the Warren server. The agent
// takes it out of its environment so commands it runs never inherit it.
const secretEnv = "WARREN_AGENT_SECRET"

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if os.Getpid() == 1 && os.Getenv(childEnv) == "" {
		// One P is plenty for waiting and reaping, and needs the fewest
		// threads when a fork bomb has taken every pid.
		runtime.GOMAXPROCS(1)
		reserveThreads(initThreads)
		self, err := os.Executable()
		if err != nil {
			log.Error("cannot find own executable", "err", err)
			os.Exit(1)
		}
		os.Exit(runInit(log, append([]string{self}, os.Args[1:]...), append(os.Environ(), childEnv+"=1"), settingsKept("/")))
	}
	os.Unsetenv(childEnv)
	reserveThreads(agentThreads)

	m := NewMain(os.Stderr)
	if err := m.ParseFlags(os.Args[1:]); err != nil {
		os.Exit(2) // ParseFlags has said why
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := m.Run(ctx); err != nil {
		m.Log.Error("agent failed to start", "err", err)
		os.Exit(1)
	}
	code := 0
	select {
	case <-ctx.Done():
		m.Log.Info("shutting down")
	case err := <-m.Failed():
		m.Log.Error("server failed", "err", err)
		code = 1
	}
	if err := m.Close(); err != nil {
		m.Log.Warn("closing", "err", err)
	}
	os.Exit(code)
}

// Main is the agent program: configuration, then its running parts.
type Main struct {
	// Port is where the agent listens on every interface. Default 49983;
	// 0 picks a free port (tests).
	Port int
	// Root is the root of the filesystem the agent prepares (default user,
	// /run/e2b). Default "/"; tests use a temporary directory.
	Root string
	// ServerSecret authenticates the Warren server on the tunnel and on
	// /init; "" (the default when the variable is unset) disables the
	// tunnel and leaves /init to its token rules alone.
	ServerSecret string
	// Verbose logs at debug level (every request, tunnel, reaped orphan).
	Verbose bool
	// CodeInterpreter also serves the code interpreter (codeinterp.go);
	// default false.
	CodeInterpreter bool
	// CodeInterpreterPort is where the code interpreter listens. Default
	// 49999; 0 picks a free port (tests).
	CodeInterpreterPort int
	// Desktop starts the desktop image's X server and XFCE session when
	// the agent starts (desktop.go); default false.
	Desktop bool
	// Restarted is set (from WARREN_AGENT_RESTARTED) in an agent that its
	// init started again after the first one ended: it loads the settings
	// the first one kept (restart.go).
	Restarted bool
	// LimitGuard ends the process group holding the most tasks once the
	// sandbox has kept hitting its pids or memory limit
	// (internal/agent/limitguard).
	// Default true; tests that run the agent outside a sandbox turn it off.
	LimitGuard bool

	Log    *slog.Logger
	stderr io.Writer

	// codeInterpreterUser is who kernels run as when the agent is root;
	// "" means codeinterp's default, root.
	codeInterpreterUser string

	ln     net.Listener
	srv    *server.Server
	proc   *process.Service
	fs     *filesystem.Service
	ci     *codeInterpreter  // nil unless CodeInterpreter
	guard  *limitguard.Guard // nil without cgroup files (gVisor) or LimitGuard
	trim   *idleTrimmer      // nil until Run
	failed chan error        // receives a server's error if it stops on its own
}

// NewMain returns a Main with the defaults, logging JSON to stderr.
func NewMain(stderr io.Writer) *Main {
	return &Main{
		Port:                server.DefaultPort,
		CodeInterpreterPort: codeInterpreterPort,
		LimitGuard:          true,
		Root:                "/",
		stderr:              stderr,
		Log:                 slog.New(slog.NewJSONHandler(stderr, nil)),
		failed:              make(chan error, 2),
	}
}

// ParseFlags reads the flags and WARREN_AGENT_SECRET, which it then
// removes from the process environment. It reports errors on stderr.
func (m *Main) ParseFlags(args []string) error {
	fl := flag.NewFlagSet("warren-agent", flag.ContinueOnError)
	fl.SetOutput(m.stderr)
	fl.IntVar(&m.Port, "port", m.Port, "port to listen on")
	fl.BoolVar(&m.Verbose, "verbose", m.Verbose, "log at debug level")
	fl.BoolVar(&m.CodeInterpreter, "code-interpreter", m.CodeInterpreter, "also serve the code interpreter (python, javascript, typescript, bash kernels)")
	fl.IntVar(&m.CodeInterpreterPort, "code-interpreter-port", m.CodeInterpreterPort, "port the code interpreter listens on")
	fl.BoolVar(&m.Desktop, "desktop", m.Desktop, "start the desktop image's X server and XFCE session at once ("+desktopScript+")")
	if err := fl.Parse(args); err != nil {
		return err
	}
	var err error
	switch {
	case fl.NArg() > 0:
		err = fmt.Errorf("unexpected arguments: %q", fl.Args())
	case m.Port < 0 || m.Port > 65535:
		err = fmt.Errorf("invalid port %d", m.Port)
	case m.CodeInterpreterPort < 0 || m.CodeInterpreterPort > 65535:
		err = fmt.Errorf("invalid code interpreter port %d", m.CodeInterpreterPort)
	}
	if err != nil {
		fmt.Fprintln(m.stderr, err)
		return err
	}
	m.ServerSecret = os.Getenv(secretEnv)
	os.Unsetenv(secretEnv)
	m.Restarted = os.Getenv(restartEnv) != ""
	os.Unsetenv(restartEnv)
	if m.Verbose {
		m.Log = slog.New(slog.NewJSONHandler(m.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

// Run prepares the sandbox and starts serving; it returns once the agent
// listens. Preparation failures are logged, not fatal: an image with a
// read-only /etc still gets a working agent, only without user "user".
func (m *Main) Run(ctx context.Context) error {
	m.prepare()

	st := state.New()
	if err := m.loadSettings(st); err != nil {
		return err
	}
	m.trim = newIdleTrimmer(freeOSMemory)
	m.proc = process.New(st, m.Log)
	m.fs = filesystem.New(st, m.Log)
	m.srv = server.New(server.Config{
		State:        st,
		Log:          m.Log,
		Process:      m.proc,
		Filesystem:   m.fs,
		Files:        files.New(st, m.Log),
		ServerSecret: m.ServerSecret,
		OnRequest:    m.trim.busy,
		Initialised: func(secret string) {
			if err := keepSettings(m.Root, keptSettings{Settings: st.Save(), ServerSecret: secret}); err != nil {
				m.Log.Warn("cannot keep the settings: an agent that ends will not be started again", "err", err)
				_ = forgetSettings(m.Root)
			}
		},
	})
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", ":"+strconv.Itoa(m.Port))
	if err != nil {
		return err
	}
	m.ln = ln
	go func() {
		if err := m.srv.Serve(ln); err != nil {
			m.failed <- err
		}
	}()
	m.Log.Info("agent listening", "addr", ln.Addr().String(), "version", state.Version, "tunnel", m.ServerSecret != "")
	if m.LimitGuard {
		m.guard = limitguard.Start(limitguard.Config{Log: m.Log})
	}
	if m.CodeInterpreter {
		if err := m.startCodeInterpreter(ctx); err != nil {
			return fmt.Errorf("code interpreter: %w", err)
		}
	}
	if m.Desktop && !m.Restarted {
		m.startDesktop()
	}
	return nil
}

// loadSettings gives a restarted agent the settings its predecessor kept;
// a first agent removes any left from an earlier run of the container.
func (m *Main) loadSettings(st *state.State) error {
	if !m.Restarted {
		if err := forgetSettings(m.Root); err != nil {
			m.Log.Warn("cannot remove settings kept by an earlier run", "err", err)
		}
		return nil
	}
	kept, err := loadSettings(m.Root)
	if err != nil {
		return fmt.Errorf("loading the settings the agent before kept: %w", err)
	}
	st.Load(kept.Settings)
	m.ServerSecret = kept.ServerSecret
	m.Log.Info("started again with the kept settings", "default_user", st.DefaultUser())
	return nil
}

// prepare makes the container look like an E2B sandbox to the code in it.
func (m *Main) prepare() {
	created, err := ensureDefaultUser(m.Root)
	switch {
	case err != nil:
		m.Log.Warn("cannot create the default user", "user", defaultUserName, "err", err)
	case created:
		m.Log.Info("created the default user", "user", defaultUserName)
	}
	// E2B_SANDBOX tells code (and E2B's own tools) it runs in a sandbox;
	// commands inherit the agent's environment.
	os.Setenv("E2B_SANDBOX", "true")
	dir := filepath.Join(m.Root, "run/e2b")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		m.Log.Warn("cannot write the sandbox marker", "err", err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, ".E2B_SANDBOX"), []byte("true"), 0o644); err != nil {
		m.Log.Warn("cannot write the sandbox marker", "err", err)
	}
}

// Addr is the address the agent listens on; valid after Run.
func (m *Main) Addr() net.Addr { return m.ln.Addr() }

// Failed delivers the server's error if it stops serving before Close.
func (m *Main) Failed() <-chan error { return m.failed }

// Close stops the code interpreter and its kernels, then the server
// (briefly letting requests finish), then the services, which kill the
// processes they started.
func (m *Main) Close() error {
	var err error
	if m.trim != nil {
		m.trim.stop()
	}
	m.guard.Close() // nil-safe
	if m.ci != nil {
		err = m.ci.Close()
	}
	if m.srv != nil {
		err = errors.Join(err, m.srv.Close())
	}
	if m.proc != nil {
		m.proc.Close()
	}
	if m.fs != nil {
		m.fs.Close()
	}
	return err
}
