package codeinterp

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
)

// kernel runs the code of one context and keeps its state between
// executions. Only one execution runs at a time; the context sees to it.
type kernel interface {
	// Execute runs code, emitting its outputs in order; a silent
	// execution emits nothing and does not count as an execution. It
	// returns once the kernel is ready for more code, errKernelDied when
	// the kernel process exited, or another error when ctx ended first or
	// the kernel cannot be talked to — then it must be closed.
	Execute(ctx context.Context, code string, silent bool, emit func(Output)) error
	// Interrupt asks the kernel to abandon the running execution.
	Interrupt() error
	// Done is closed once the kernel process has exited.
	Done() <-chan struct{}
	// Close kills the kernel process and what it forked, and waits.
	Close() error
}

// kernelStarter starts a kernel for a language in a working directory.
type kernelStarter func(ctx context.Context, lang, cwd string) (kernel, error)

// startKernel is the production kernelStarter.
func (s *Server) startKernel(ctx context.Context, lang, cwd string) (kernel, error) {
	as, err := s.identity()
	if err != nil {
		return nil, err
	}
	log := s.log.With("language", lang)
	out := &logWriter{log: log}
	switch lang {
	case langPython:
		return startJupyterKernel(ctx, launch{
			argv: []string{s.cfg.Python, "-m", "ipykernel_launcher", "-f", "{connection_file}",
				"--IPKernelApp.exec_files=" + filepath.Join(s.runtimeDir, pythonStartupFile)},
			dir: cwd,
			env: kernelEnv(as,
				"MPLBACKEND=module://matplotlib_inline.backend_inline",
				"PYDEVD_DISABLE_FILE_VALIDATION=1", // silences a debugger warning on every start
			),
			as: as, stdout: out, stderr: out,
		}, s.runtimeDir, log)
	case langR:
		return startJupyterKernel(ctx, launch{
			argv: []string{s.cfg.R, "--slave", "-e", "IRkernel::main()", "--args", "{connection_file}"},
			dir:  cwd, env: kernelEnv(as), as: as, stdout: out, stderr: out,
		}, s.runtimeDir, log)
	case langBash:
		return startBashKernel(launch{argv: []string{s.cfg.Bash, "--noprofile", "--norc"}, dir: cwd, env: kernelEnv(as), as: as}, s.runtimeDir, log)
	case langJavaScript, langTypeScript:
		script := filepath.Join(s.runtimeDir, nodeKernelFile)
		argv := []string{s.cfg.Node, script}
		if lang == langTypeScript {
			argv = append(argv, "--typescript")
		}
		return startJSONKernel(ctx, launch{argv: argv, dir: cwd, env: kernelEnv(as), as: as, stderr: out}, log)
	case langJava:
		argv, err := s.javaCommand(ctx)
		if err != nil {
			return nil, err
		}
		return startJSONKernel(ctx, launch{argv: argv, dir: cwd, env: kernelEnv(as), as: as}, log)
	}
	return nil, fmt.Errorf("unsupported language %q", lang)
}

// logWriter logs what a kernel process writes outside the protocol
// (ipykernel's own warnings, crashes) at debug level, line by line.
type logWriter struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte // guarded by mu; an unfinished line
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.log.Debug("kernel output", "line", string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 4096 {
		w.log.Debug("kernel output", "line", string(w.buf))
		w.buf = nil
	}
	return len(p), nil
}
