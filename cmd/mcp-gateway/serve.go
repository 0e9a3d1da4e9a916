package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/warrenhq/warren/internal/mcpgateway"
)

// run starts the servers, then serves them until ctx ends; ready is told
// once they are all up (or why not, by serve).
func run(ctx context.Context, cfg config, log *slog.Logger, ready func(string)) error {
	servers, err := cfg.servers()
	if err != nil {
		return err
	}
	token, err := mcpgateway.Token(getenvToken(), cfg.tokenFile)
	if err != nil {
		return err
	}
	// Listen first: a port already taken (a gateway running) fails at
	// once, before any server is installed.
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is a gateway already running?)", cfg.addr, err)
	}
	defer ln.Close()

	g := mcpgateway.New(cfg.opts, log)
	defer g.Close()
	startCtx, cancel := context.WithTimeout(ctx, cfg.startTimeout)
	err = g.Start(startCtx, servers)
	cancel()
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: g.Handler(token, log), ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("MCP gateway ready", "addr", ln.Addr().String(), "servers", len(servers), "tools", len(g.Tools()))
	ready(fmt.Sprintf("ready: %d server(s), %d tool(s) on %s%s", len(servers), len(g.Tools()), cfg.addr, mcpgateway.Path))
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
