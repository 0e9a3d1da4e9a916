package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/warrenhq/warren/internal/agent/codeinterp"
)

// codeInterpreterPort is where E2B's @e2b/code-interpreter SDK expects
// the code interpreter.
const codeInterpreterPort = 49999

// codeInterpreterGrace is how long Close lets running executions end.
const codeInterpreterGrace = 2 * time.Second

// codeInterpreter is the code-interpreter server and the listener it
// serves on.
type codeInterpreter struct {
	srv  *codeinterp.Server
	http *http.Server
	addr net.Addr
	done chan struct{} // closed when Serve has returned
}

// startCodeInterpreter serves the code interpreter next to the agent. Like
// E2B's template it starts the python and javascript kernels right away,
// in the background, so the first execution does not wait for them.
// Kernels run as the default user in its home. The proxy, not this
// server, enforces traffic tokens.
func (m *Main) startCodeInterpreter(ctx context.Context) error {
	_, agentPort, err := net.SplitHostPort(m.ln.Addr().String())
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", ":"+strconv.Itoa(m.CodeInterpreterPort))
	if err != nil {
		return err
	}
	log := m.Log.With("service", "code-interpreter")
	srv, err := codeinterp.New(codeinterp.Config{
		User:     m.codeInterpreterUser,
		Workdir:  filepath.Join(m.Root, defaultUserHome),
		AgentURL: "http://127.0.0.1:" + agentPort,
		Prestart: []string{"python", "javascript"},
		Logger:   log,
	})
	if err != nil {
		ln.Close()
		return err
	}
	ci := &codeInterpreter{
		srv: srv,
		http: &http.Server{
			Handler: srv,
			// E2B's server keeps idle connections this long; the SDK
			// reuses them between executions.
			IdleTimeout:       640 * time.Second,
			ReadHeaderTimeout: 30 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		addr: ln.Addr(),
		done: make(chan struct{}),
	}
	m.ci = ci
	go func() {
		defer close(ci.done)
		if err := ci.http.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			m.failed <- fmt.Errorf("code interpreter: %w", err)
		}
	}()
	m.Log.Info("code interpreter listening", "addr", ln.Addr().String())
	return nil
}

// Close stops accepting requests and gives running executions a moment
// to end, then kills every kernel, which ends the executions still
// streaming.
func (ci *codeInterpreter) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), codeInterpreterGrace)
	defer cancel()
	graceful := ci.http.Shutdown(ctx) == nil
	err := ci.srv.Close()
	if !graceful {
		ci.http.Close()
	}
	<-ci.done
	return err
}
