package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// tokenEnv is where E2B's SDK passes the token it chose.
const tokenEnv = "GATEWAY_ACCESS_TOKEN"

func getenvToken() string { return os.Getenv(tokenEnv) }

// startBackground starts the gateway as a daemon (its own session, output
// to the log file, no pipe back to the caller) and waits until it reports
// that its servers are up, so the SDK's `commands.run` returns when the
// endpoint answers, and fails with the reason when it will not.
func (m *Main) startBackground(ctx context.Context, cfg config) error {
	// Check the config here, so a bad one fails with no daemon started.
	if _, err := cfg.servers(); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	file := cfg.file
	if file == "" {
		// The config may hold API keys: the daemon reads it from a file only
		// root can read, not from its command line.
		file = filepath.Join(filepath.Dir(cfg.tokenFile), "config.json")
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(file, []byte(cfg.json), 0o600); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(cfg.logFile), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(cfg.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(self, "--foreground", "--config-file", file, "--addr", cfg.addr,
		"--token-file", cfg.tokenFile, "--start-timeout", cfg.startTimeout.String(), "--ready-fd", "3")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("start the gateway: %w", err)
	}
	w.Close()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()

	line := make(chan string, 1)
	go func() {
		// The daemon writes one message, which may span lines, then closes.
		b, _ := io.ReadAll(r)
		line <- strings.TrimSpace(string(b))
	}()
	var msg string
	select {
	case msg = <-line:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return ctx.Err()
	}
	if rest, ok := strings.CutPrefix(msg, "ready: "); ok {
		fmt.Fprintf(m.Stdout, "MCP gateway (pid %d) ready: %s (token in %s, log %s)\n", cmd.Process.Pid, rest, cfg.tokenFile, cfg.logFile)
		return nil
	}
	<-exited
	if rest, ok := strings.CutPrefix(msg, "error: "); ok {
		return errors.New(rest)
	}
	return fmt.Errorf("the gateway exited before it was ready; the end of %s: %s", cfg.logFile, tail(cfg.logFile, 2048))
}

// tail is the last n bytes of a file.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}
