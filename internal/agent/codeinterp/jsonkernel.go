package codeinterp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"time"
)

// jsonKernel is a kernel process of our own, spoken to by JSON lines
// (requests on its stdin, messages on its fd 3): kernels/kernel.js in node
// for JavaScript and TypeScript, javakernel's JShellKernel in a JVM for
// Java. What the process (or its children) writes straight to fd 1 and 2
// is forwarded to the running execution too, without ordering guarantees.
type jsonKernel struct {
	proc  *process
	stdin io.WriteCloser
	log   *slog.Logger
	next  int      // request ids; only Execute touches it
	out   execSink // the running execution, if any

	done chan kernelReply // replies to requests, by the reader
}

// kernelMessage is a line the kernel writes on fd 3.
type kernelMessage struct {
	Type      string `json:"type"`
	ID        int    `json:"id"`
	Text      string `json:"text"`
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

type kernelReply struct{ id int }

func startJSONKernel(ctx context.Context, l launch, log *slog.Logger) (*jsonKernel, error) {
	k := &jsonKernel{log: log, done: make(chan kernelReply, 1)}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	msgR, msgW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	l.stdin, l.extraFiles = stdinR, []*os.File{msgW}
	l.stdout = sinkWriter{k, stdoutLine}
	l.stderr = sinkWriter{k, stderrLine}
	k.proc, err = startProcess(l)
	stdinR.Close()
	msgW.Close()
	if err != nil {
		stdinW.Close()
		msgR.Close()
		return nil, err
	}
	k.stdin = stdinW
	go k.read(msgR)
	// A first, empty execution proves the kernel is up and the REPL ready.
	if err := k.Execute(ctx, "", true, nil); err != nil {
		k.Close()
		return nil, fmt.Errorf("kernel did not start (%v): %w", k.proc.err, err)
	}
	return k, nil
}

func (k *jsonKernel) read(r io.ReadCloser) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			k.handle(line)
		}
		if err != nil {
			return
		}
	}
}

func (k *jsonKernel) handle(line []byte) {
	var m kernelMessage
	if err := json.Unmarshal(line, &m); err != nil {
		k.log.Warn("bad message from kernel", "err", err)
		return
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	switch m.Type {
	case "stdout":
		k.out.send(stdoutLine(m.Text, now))
	case "stderr":
		k.out.send(stderrLine(m.Text, now))
	case "result":
		k.out.send(Output{Type: typeResult, Text: m.Text, Result: &Result{IsMainResult: true}})
	case "error":
		k.out.send(errorLine(m.Name, m.Value, m.Traceback))
	case "done":
		select {
		case k.done <- kernelReply{id: m.ID}:
		case <-k.proc.done:
		}
	}
}

func (k *jsonKernel) Execute(ctx context.Context, code string, silent bool, emit func(Output)) error {
	k.next++
	id := k.next
	req, _ := json.Marshal(struct {
		ID   int    `json:"id"`
		Code string `json:"code"`
	}{id, code})
	defer k.out.begin(emit, silent)()
	if _, err := k.stdin.Write(append(req, '\n')); err != nil {
		return errKernelDied
	}
	for {
		select {
		case r := <-k.done:
			if r.id == id {
				return nil
			}
		case <-k.proc.done:
			return errKernelDied
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (k *jsonKernel) Interrupt() error { return k.proc.signal(syscall.SIGINT) }

func (k *jsonKernel) Done() <-chan struct{} { return k.proc.done }

func (k *jsonKernel) Close() error {
	k.stdin.Close()
	k.proc.kill()
	return nil
}

// sinkWriter forwards a kernel's raw stdout or stderr to the running
// execution.
type sinkWriter struct {
	k    *jsonKernel
	line func(text, ts string) Output
}

func (w sinkWriter) Write(p []byte) (int, error) {
	w.k.out.send(w.line(string(p), time.Now().UTC().Format(time.RFC3339Nano)))
	return len(p), nil
}
