// Command mcp-gateway is the MCP gateway of Warren's mcp-gateway template:
// what E2B's SDK runs in the sandbox for `Sandbox.create({ mcp })` and
// `Template().addMcpServer(...)`. One static binary:
//
//	mcp-gateway --config '<json>'    start the config's servers, serve them on
//	                                 :50005/mcp in the background, exit once ready
//	mcp-gateway pull NAME...         install servers ahead of time (template builds)
//
//	CGO_ENABLED=0 go build -o mcp-gateway ./cmd/mcp-gateway
//
// Environment: GATEWAY_ACCESS_TOKEN (the bearer token; generated when
// empty, written to /etc/mcp-gateway/.token either way), MCP_GATEWAY_GIT_BASE
// (where github/<owner>/<repo> entries are cloned from, default
// https://github.com), MCP_GATEWAY_DIR (clones and packages, default
// /opt/mcp-gateway), MCP_GATEWAY_LOG (the background gateway's log,
// default /var/log/mcp-gateway.log).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/warrenhq/warren/internal/mcpgateway"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	err := m.Run(ctx, os.Args[1:])
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "mcp-gateway:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "mcp-gateway:", err)
		os.Exit(1)
	}
}

// Main is the program: its output streams and environment.
type Main struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

const usage = `Usage:
  mcp-gateway --config '<json>' [flags]   start the servers, serve them on :50005/mcp in the
                                          background, and exit once they are all up
  mcp-gateway --config-file PATH [flags]  the same, with the config in a file
  mcp-gateway pull NAME...                install catalog servers (or clone github/<owner>/<repo>)
                                          ahead of time, e.g. into a template

The config is E2B's: {"<catalog name>": {params}, "github/<owner>/<repo>": {"runCmd": "...",
"installCmd": "...", "envs": {...}}}. Catalog: %s.

Environment: GATEWAY_ACCESS_TOKEN, MCP_GATEWAY_GIT_BASE (default https://github.com),
MCP_GATEWAY_DIR (default /opt/mcp-gateway), MCP_GATEWAY_LOG (default /var/log/mcp-gateway.log).

Flags:
`

// config is what a start is given.
type config struct {
	json, file   string
	addr         string
	tokenFile    string
	logFile      string
	foreground   bool
	readyFD      int
	startTimeout time.Duration
	opts         mcpgateway.Options
}

// Run runs the command line args.
func (m *Main) Run(ctx context.Context, args []string) error {
	opts := mcpgateway.Options{GitBase: m.Getenv("MCP_GATEWAY_GIT_BASE"), Dir: m.Getenv("MCP_GATEWAY_DIR")}
	if len(args) > 0 && args[0] == "pull" {
		opts.Output = m.Stdout
		return mcpgateway.Pull(ctx, opts, args[1:])
	}
	cfg, err := m.parseFlags(args)
	if err != nil {
		return err
	}
	cfg.opts = opts
	if cfg.foreground {
		return m.serve(ctx, cfg)
	}
	return m.startBackground(ctx, cfg)
}

func (m *Main) parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("mcp-gateway", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), usage, joinNames())
		fs.PrintDefaults()
	}
	var cfg config
	fs.StringVar(&cfg.json, "config", "", "the config, as JSON")
	fs.StringVar(&cfg.file, "config-file", "", "a file holding the config")
	fs.StringVar(&cfg.addr, "addr", ":"+strconv.Itoa(mcpgateway.DefaultPort), "address to serve on")
	fs.StringVar(&cfg.tokenFile, "token-file", mcpgateway.DefaultTokenFile, "where the access token is written (mode 0600)")
	fs.StringVar(&cfg.logFile, "log", envOr(m.Getenv, "MCP_GATEWAY_LOG", "/var/log/mcp-gateway.log"), "the background gateway's log")
	fs.BoolVar(&cfg.foreground, "foreground", false, "serve in the foreground instead of starting in the background")
	fs.DurationVar(&cfg.startTimeout, "start-timeout", 10*time.Minute, "how long the servers may take to install and start")
	fs.IntVar(&cfg.readyFD, "ready-fd", 0, "file descriptor to report readiness on (set by the background start)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config{}, nil
		}
		return config{}, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return config{}, usageError{fmt.Sprintf("unexpected arguments %q (did you mean pull?)", fs.Args())}
	}
	if (cfg.json == "") == (cfg.file == "") {
		fs.Usage()
		return config{}, usageError{"give the config with either --config or --config-file"}
	}
	return cfg, nil
}

func joinNames() string {
	s := ""
	for i, n := range mcpgateway.CatalogNames() {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// servers reads and checks the config.
func (cfg config) servers() ([]mcpgateway.Server, error) {
	data := []byte(cfg.json)
	if cfg.file != "" {
		b, err := os.ReadFile(cfg.file)
		if err != nil {
			return nil, err
		}
		data = b
	}
	return mcpgateway.ParseConfig(data)
}

// serve runs the gateway until ctx ends.
func (m *Main) serve(ctx context.Context, cfg config) (err error) {
	ready := func(string) {}
	if cfg.readyFD > 0 {
		// Not inherited by the servers, so closing it here is the EOF the
		// starting process waits for.
		syscall.CloseOnExec(cfg.readyFD)
		f := os.NewFile(uintptr(cfg.readyFD), "ready")
		ready = func(msg string) {
			if f != nil {
				fmt.Fprintln(f, msg)
				f.Close()
				f = nil
			}
		}
		defer func() {
			if err != nil {
				ready("error: " + err.Error())
			}
		}()
	}
	cfg.opts.Output = m.Stderr
	log := slog.New(slog.NewTextHandler(m.Stderr, nil))
	return run(ctx, cfg, log, ready)
}
