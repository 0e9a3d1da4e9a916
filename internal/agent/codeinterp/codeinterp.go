// Package codeinterp is the code-interpreter server of a sandbox: the HTTP
// API on port 49999 that E2B's @e2b/code-interpreter SDK talks to (execute
// code with streamed NDJSON output, manage contexts), backed by kernels it
// starts itself — ipykernel (and IRkernel) over the Jupyter protocol, and
// our own bash, node and Java (JShell) kernels. It owns the kernel processes and their
// contexts; it does not listen on a port, install interpreters, or know
// the agent's other services beyond GET /envs.
package codeinterp

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/agent/users"
)

// Config configures the server. Zero fields take the documented defaults.
type Config struct {
	// User is the account kernels run as, when the agent runs as root.
	// Default "root", as in E2B's template, whose Jupyter server runs as
	// root (so a context may have cwd /root). An agent that is not root
	// runs kernels as itself.
	User string
	// Workdir is the cwd of contexts created without one. Default: the
	// home of User (of the agent's user when not root).
	Workdir string
	// Python, Node, Bash, R and Java are the interpreters, looked up on
	// PATH unless absolute. Defaults "python3", "node", "bash", "R",
	// "java". A language whose interpreter (or kernel package) is missing
	// fails to start. Java runs the kernel compiled into the image, or
	// else compiles it with the javac next to Java (or on PATH).
	Python, Node, Bash, R, Java string
	// AgentURL is where the agent serves GET /envs. Default
	// "http://localhost:49983"; "-" disables sandbox-wide env vars.
	AgentURL string
	// TrafficToken, when set, must be sent as E2B-Traffic-Access-Token on
	// every request but GET /health. Default "": not enforced.
	TrafficToken string
	// Keepalive is the silence after which an execution stream gets a
	// keepalive line. Default 5s.
	Keepalive time.Duration
	// StartTimeout bounds a kernel start. Default 60s.
	StartTimeout time.Duration
	// InterruptGrace is how long a kernel may take to stop after an
	// interrupt before it is killed and restarted. Default 5s.
	InterruptGrace time.Duration
	// Prestart lists languages whose default context New starts in the
	// background. Default none; the agent should pass python and
	// javascript, as E2B's template does.
	Prestart []string
	// Logger receives the server's logs. Default: discarded.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.User, "root")
	def(&c.Python, "python3")
	def(&c.Node, "node")
	def(&c.Bash, "bash")
	def(&c.R, "R")
	def(&c.Java, "java")
	def(&c.AgentURL, "http://localhost:49983")
	if c.AgentURL == "-" {
		c.AgentURL = ""
	}
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{{&c.Keepalive, 5 * time.Second}, {&c.StartTimeout, time.Minute}, {&c.InterruptGrace, 5 * time.Second}} {
		if *d.p <= 0 {
			*d.p = d.v
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

//go:embed kernels
var kernelFiles embed.FS

// Files New writes to the runtime directory for the kernels to load.
const (
	pythonStartupFile = "startup.py"
	pythonChartsFile  = "warren_charts.py"
	nodeKernelFile    = "kernel.js"
)

// Server is the code-interpreter HTTP handler. Close it to stop every
// kernel.
type Server struct {
	cfg        Config
	log        *slog.Logger
	mux        *http.ServeMux
	envs       *envsClient
	start      kernelStarter
	runtimeDir string // connection files and kernel scripts; removed by Close

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	javaMu       sync.Mutex // serializes compiling the Java kernel
	javaCompiled bool       // guarded by javaMu; the kernel is in runtimeDir

	seq      atomic.Uint64 // numbers contexts in order of creation
	mu       sync.Mutex
	contexts map[string]*codeContext // guarded by mu; by id
	defaults map[string]*codeContext // guarded by mu; by language
}

// New returns a server with no kernel running yet, except those it starts
// in the background for cfg.Prestart.
func New(cfg Config) (*Server, error) {
	s, err := newServer(cfg, nil)
	if err != nil {
		return nil, err
	}
	for _, lang := range s.cfg.Prestart {
		lang, ok := normalizeLanguage(lang)
		if !ok {
			s.Close()
			return nil, fmt.Errorf("codeinterp: cannot prestart unknown language %q", lang)
		}
		s.background(s.defaultContext(lang).warm)
	}
	return s, nil
}

// newServer builds the server; start replaces the real kernels in tests.
func newServer(cfg Config, start kernelStarter) (*Server, error) {
	cfg = cfg.withDefaults()
	dir, err := os.MkdirTemp("", "warren-codeinterp-")
	if err != nil {
		return nil, fmt.Errorf("codeinterp: runtime dir: %w", err)
	}
	// Kernels running as another user must reach their files in it, and
	// list it: Python's import system lists a sys.path directory before
	// it imports a module from it (startup.py imports warren_charts). The
	// connection files in it are readable by their kernel's user only.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	for _, name := range []string{pythonStartupFile, pythonChartsFile, nodeKernelFile} {
		raw, err := kernelFiles.ReadFile("kernels/" + name)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), raw, 0o644)
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("codeinterp: write %s: %w", name, err), os.RemoveAll(dir))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:        cfg,
		log:        cfg.Logger,
		envs:       newEnvsClient(cfg.AgentURL),
		runtimeDir: dir,
		ctx:        ctx,
		cancel:     cancel,
		contexts:   map[string]*codeContext{},
		defaults:   map[string]*codeContext{},
	}
	s.start = start
	if s.start == nil {
		s.start = s.startKernel
	}
	s.mux = s.routes()
	return s, nil
}

// Close kills every kernel and waits for the server's goroutines.
func (s *Server) Close() error {
	s.cancel()
	s.mu.Lock()
	all := s.contexts
	s.contexts, s.defaults = map[string]*codeContext{}, map[string]*codeContext{}
	s.mu.Unlock()
	for _, c := range all {
		c.kill(true)
	}
	s.wg.Wait()
	return os.RemoveAll(s.runtimeDir)
}

// background runs f on a goroutine Close waits for, unless closing.
func (s *Server) background(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() == nil {
		s.wg.Go(f)
	}
}

// identity resolves the user kernels run as; nil means the agent's own.
func (s *Server) identity() (*users.User, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := users.Lookup(s.cfg.User)
	if err != nil {
		return nil, fmt.Errorf("kernel user %q: %w", s.cfg.User, err)
	}
	return u, nil
}

// defaultWorkdir is the cwd of contexts created without one.
func (s *Server) defaultWorkdir() string {
	if s.cfg.Workdir != "" {
		return s.cfg.Workdir
	}
	if u, err := s.identity(); err == nil && u != nil {
		return u.Home
	}
	if home, err := os.UserHomeDir(); err == nil {
		return home
	}
	return "/"
}
