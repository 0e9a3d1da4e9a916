// Package server is the agent's HTTP front door on port 49983: it mounts
// the process and filesystem Connect services and the /files handler, and
// itself serves /health, /init, /envs, /metrics and Warren's port tunnel,
// behind CORS, the access-token check and request logging. It owns the
// http.Server (HTTP/1.1 and h2c) and the tunnels it hijacked. What the
// services do is not its business; it only routes to them.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/agent/rpctimeout"
	"github.com/warrenhq/warren/internal/agent/state"
	"github.com/warrenhq/warren/proto/filesystem/filesystemconnect"
	"github.com/warrenhq/warren/proto/process/processconnect"
)

// DefaultPort is the port the agent listens on, the one E2B's SDKs address.
const DefaultPort = 49983

// Config is what the server serves. State, Log, Process, Filesystem and
// Files are required.
type Config struct {
	State      *state.State
	Log        *slog.Logger
	Process    processconnect.ProcessHandler
	Filesystem filesystemconnect.FilesystemHandler
	Files      http.Handler // GET and POST /files; does its own auth

	// ServerSecret authenticates the Warren server on the paths only it
	// calls: /_warren/tunnel and /init (X-Warren-Agent-Secret), so that a
	// local process reaching the agent's published port, past the proxy's
	// filter of those paths, can neither tunnel nor (re)configure the
	// agent. "" disables the tunnel (every attempt gets 403) and leaves
	// /init to its token rules alone (a standalone agent).
	ServerSecret string
	// ShutdownGrace bounds how long Close waits for requests in flight
	// before cutting them. Zero means 2 s.
	ShutdownGrace time.Duration
	// TrustRoot is the root of the file system whose trust store /init's
	// caBundle goes into. Default "/".
	TrustRoot string
	// Initialised, if set, is called after each /init that changed the
	// settings, with the server secret then in force.
	Initialised func(secret string)
	// OnRequest, if set, is called as each request starts, before any
	// other handling: the agent's idle memory trim (cmd/warren-agent).
	OnRequest func()
}

// Server is the agent's HTTP server. It is an http.Handler; Serve runs it
// on a listener.
type Server struct {
	cfg     Config
	log     *slog.Logger
	handler http.Handler
	metrics *metricsSampler
	initMu  sync.Mutex // held by the one /init allowed at a time
	// secret is the server secret now in force: Config.ServerSecret
	// until an /init replaces it (a fork's agent, restored with its
	// source's secret in memory, is given its own).
	secret atomic.Pointer[string]

	mu      sync.Mutex
	httpSrv *http.Server          // guarded by mu; nil until Serve
	tunnels map[net.Conn]struct{} // guarded by mu; hijacked connections of live tunnels
	closed  bool                  // guarded by mu; set by Close
	wg      sync.WaitGroup        // tunnel copy goroutines
}

// New returns a server for cfg.
func New(cfg Config) *Server {
	if cfg.TrustRoot == "" {
		cfg.TrustRoot = "/"
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 2 * time.Second
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Log,
		metrics: newMetricsSampler("/"),
		tunnels: map[net.Conn]struct{}{},
	}
	s.secret.Store(&cfg.ServerSecret)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("POST /init", s.init)
	mux.HandleFunc("GET /envs", s.envs)
	mux.HandleFunc("GET /metrics", s.serveMetrics)
	mux.Handle("GET /files", cfg.Files)
	mux.Handle("POST /files", cfg.Files)
	mux.HandleFunc("GET "+tunnelPath, s.tunnel)
	// Messages under 1 KiB (most events and replies) go uncompressed even
	// to clients that accept gzip: compressing them costs more than it saves.
	small := connect.WithCompressMinBytes(1 << 10)
	procPath, procHandler := processconnect.NewProcessHandler(cfg.Process, small)
	mux.Handle(procPath, rpctimeout.Unbounded(procHandler))
	fsPath, fsHandler := filesystemconnect.NewFilesystemHandler(cfg.Filesystem, small)
	mux.Handle(fsPath, rpctimeout.Unbounded(fsHandler))

	// CORS runs first so preflights never meet the token check, as in envd.
	s.handler = s.logRequests(cors(s.requireToken(mux)))
	return s
}

// serverSecret returns the server secret now in force; "" = none.
func (s *Server) serverSecret() string { return *s.secret.Load() }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cfg.OnRequest != nil {
		s.cfg.OnRequest()
	}
	s.handler.ServeHTTP(w, r)
}

// Serve serves HTTP/1.1 and unencrypted HTTP/2 on ln until Close. It
// returns nil after Close.
func (s *Server) Serve(ln net.Listener) error {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:   s,
		Protocols: &protocols,
		// envd's idle timeout; the SDK keeps connections for long streams.
		IdleTimeout:       640 * time.Second,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.httpSrv = srv
	s.mu.Unlock()

	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops accepting, gives requests in flight ShutdownGrace to finish,
// then cuts them and every tunnel, and waits for the tunnels' goroutines.
// Streams (process output, watches) rarely finish on their own, so the
// grace is short.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	srv := s.httpSrv
	s.mu.Unlock()

	var err error
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
		if srv.Shutdown(ctx) != nil {
			err = srv.Close()
		}
		cancel()
	}
	s.mu.Lock()
	for c := range s.tunnels {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) envs(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.cfg.State.EnvVars())
}

// errorBody is envd's REST error shape.
type errorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	writeJSON(w, code, errorBody{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	// The status is sent; a failed write means the client left.
	_ = json.NewEncoder(w).Encode(v)
}
