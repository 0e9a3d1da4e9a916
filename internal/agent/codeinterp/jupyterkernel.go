package codeinterp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/warrenhq/warren/internal/agent/codeinterp/jupyter"
)

// jupyterKernel is a real Jupyter kernel process (ipykernel, IRkernel)
// spoken to over the messaging protocol.
type jupyterKernel struct {
	proc     *process
	client   *jupyter.Client
	connFile string
	log      *slog.Logger
}

// startJupyterKernel starts argv, in which "{connection_file}" stands for
// the path of the connection file, and waits until the kernel answers.
func startJupyterKernel(ctx context.Context, l launch, runtimeDir string, log *slog.Logger) (*jupyterKernel, error) {
	info, err := jupyter.NewConnectionInfo()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(runtimeDir, "kernel-"+jupyter.NewID()+".json")
	uid, gid := -1, -1
	if l.as != nil && os.Geteuid() == 0 {
		uid, gid = int(l.as.UID), int(l.as.GID)
	}
	if err := info.WriteFile(path, uid, gid); err != nil {
		return nil, fmt.Errorf("write connection file: %w", err)
	}
	for i, a := range l.argv {
		l.argv[i] = strings.ReplaceAll(a, "{connection_file}", path)
	}
	proc, err := startProcess(l)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	k := &jupyterKernel{proc: proc, connFile: path, log: log}
	ctx, cancel := untilDone(ctx, proc.done)
	defer cancel()
	if err := k.connect(ctx, info); err != nil {
		k.Close()
		if isDone(proc.done) {
			return nil, fmt.Errorf("kernel exited during start (%v)", proc.err)
		}
		return nil, err
	}
	return k, nil
}

func (k *jupyterKernel) connect(ctx context.Context, info jupyter.ConnectionInfo) error {
	// zmq4 dials in a loop that ignores ctx; wait until the kernel listens
	// so that a kernel dying during start is noticed at once.
	for _, port := range []int{info.ShellPort, info.IOPubPort} {
		if err := waitListening(ctx, info.IP, port); err != nil {
			return fmt.Errorf("kernel did not listen: %w", err)
		}
	}
	c, err := jupyter.Dial(info, k.log)
	if err != nil {
		return err
	}
	k.client = c
	if err := c.WaitReady(ctx); err != nil {
		return fmt.Errorf("kernel did not answer: %w", err)
	}
	return nil
}

func waitListening(ctx context.Context, ip string, port int) error {
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (k *jupyterKernel) Execute(ctx context.Context, code string, silent bool, emit func(Output)) error {
	ctx, cancel := untilDone(ctx, k.proc.done)
	defer cancel()
	req := jupyter.ExecuteRequest{Code: code, Silent: silent, StoreHistory: !silent}
	reply, err := k.client.Execute(ctx, req, func(m *jupyter.Message) {
		if o, ok := outputOf(m); ok && !silent {
			emit(o)
		}
	})
	if errors.Is(err, jupyter.ErrClosed) {
		// The connection drops as the kernel dies, a moment before the
		// process is reaped; tell the two apart.
		select {
		case <-k.proc.done:
		case <-time.After(2 * time.Second):
		}
	}
	if isDone(k.proc.done) {
		return errKernelDied
	}
	if err != nil {
		return err
	}
	if reply.Status == "aborted" && !silent {
		emit(errorLine(errExecutionAborted, "the kernel aborted the execution", ""))
	}
	return nil
}

func (k *jupyterKernel) Interrupt() error { return k.proc.signal(syscall.SIGINT) }

func (k *jupyterKernel) Done() <-chan struct{} { return k.proc.done }

func (k *jupyterKernel) Close() error {
	k.proc.kill()
	if k.client != nil {
		k.client.Close()
	}
	os.Remove(k.connFile)
	return nil
}

// outputOf turns an iopub message into an output line, if it is one.
func outputOf(m *jupyter.Message) (Output, bool) {
	switch m.Header.MsgType {
	case "stream":
		var c struct{ Name, Text string }
		if json.Unmarshal(m.Content, &c) != nil || c.Text == "" {
			return Output{}, false
		}
		if c.Name == "stderr" {
			return stderrLine(c.Text, m.Header.Date), true
		}
		return stdoutLine(c.Text, m.Header.Date), true
	case "execute_input":
		var c struct {
			ExecutionCount int `json:"execution_count"`
		}
		if json.Unmarshal(m.Content, &c) != nil {
			return Output{}, false
		}
		return countLine(c.ExecutionCount), true
	case "execute_result", "display_data", "update_display_data":
		var c struct {
			Data map[string]any `json:"data"`
		}
		if json.Unmarshal(m.Content, &c) != nil {
			return Output{}, false
		}
		return resultLine(c.Data, m.Header.MsgType == "execute_result"), true
	case "error":
		var c struct {
			EName     string   `json:"ename"`
			EValue    string   `json:"evalue"`
			Traceback []string `json:"traceback"`
		}
		if json.Unmarshal(m.Content, &c) != nil {
			return Output{}, false
		}
		return errorLine(c.EName, c.EValue, strings.Join(c.Traceback, "\n")), true
	}
	return Output{}, false
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// untilDone returns a context that also ends when done is closed.
func untilDone(ctx context.Context, done <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() { // ends with ctx, which cancel guarantees
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
