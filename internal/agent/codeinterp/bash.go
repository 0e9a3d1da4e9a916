package codeinterp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/warrenhq/warren/internal/agent/codeinterp/jupyter"
)

// bashKernel is one long-lived bash process. Each cell is written to a
// file and sourced, so variables, functions and the cwd persist, and the
// cell's stdin is /dev/null rather than our command pipe. After the cell,
// bash prints an end marker with the exit status on stdout and one on
// stderr; an execution ends when both arrived.
type bashKernel struct {
	proc   *process
	stdin  io.WriteCloser
	cell   string // path of the cell file
	marker string
	log    *slog.Logger
	out    execSink // the running execution, if any

	markers chan string // what followed each marker: " <status>" on stdout, "" on stderr
}

// bashInit makes an interrupt end the running cell instead of the shell
// (a non-interactive bash exits on SIGINT otherwise).
const bashInit = "trap 'return 130 2>/dev/null' INT\n"

func startBashKernel(l launch, runtimeDir string, log *slog.Logger) (*bashKernel, error) {
	k := &bashKernel{
		cell:    filepath.Join(runtimeDir, "bash-"+jupyter.NewID()+".sh"),
		marker:  "\x1ewarren-end-" + jupyter.NewID(),
		log:     log,
		markers: make(chan string, 2),
	}
	stdin, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	l.stdin, l.stdout, l.stderr = stdin, outW, errW
	k.proc, err = startProcess(l)
	for _, f := range []*os.File{stdin, outW, errW} {
		f.Close() // the child has its copies
	}
	if err != nil {
		stdinW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	k.stdin = stdinW
	go k.read(outR, stdoutLine)
	go k.read(errR, stderrLine)
	if _, err := io.WriteString(k.stdin, bashInit); err != nil {
		k.Close()
		return nil, fmt.Errorf("bash: %w", err)
	}
	return k, nil
}

// read forwards one output pipe until the process and its children close
// it.
func (k *bashKernel) read(r *os.File, line func(text, ts string) Output) {
	defer r.Close()
	m := &markerReader{marker: []byte(k.marker)}
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		for p := buf[:n]; ; p = nil {
			text, rest, found := m.feed(p)
			if len(text) > 0 {
				k.out.send(line(string(text), time.Now().UTC().Format(time.RFC3339Nano)))
			}
			if !found {
				break
			}
			select {
			case k.markers <- rest:
			case <-k.proc.done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (k *bashKernel) Execute(ctx context.Context, code string, silent bool, emit func(Output)) error {
	if err := os.WriteFile(k.cell, []byte(code+"\n"), 0o644); err != nil {
		return fmt.Errorf("bash: write cell: %w", err)
	}
	defer k.out.begin(emit, silent)()
	cmd := fmt.Sprintf(". %s </dev/null; printf '%%s %%d\\n' %s \"$?\"; printf '%%s\\n' %s >&2\n",
		shellQuote(k.cell), shellQuote(k.marker), shellQuote(k.marker))
	if _, err := io.WriteString(k.stdin, cmd); err != nil {
		return errKernelDied
	}
	status := ""
	for seen := 0; seen < 2; seen++ {
		select {
		case rest := <-k.markers:
			if s := strings.TrimSpace(rest); s != "" {
				status = s
			}
		case <-k.proc.done:
			return errKernelDied
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if code, err := strconv.Atoi(status); err == nil && code != 0 && !silent {
		emit(errorLine("ExitCode", status, fmt.Sprintf("the last command exited with status %d", code)))
	}
	return nil
}

func (k *bashKernel) Interrupt() error { return k.proc.signal(syscall.SIGINT) }

func (k *bashKernel) Done() <-chan struct{} { return k.proc.done }

func (k *bashKernel) Close() error {
	k.stdin.Close()
	k.proc.kill()
	os.Remove(k.cell)
	return nil
}
