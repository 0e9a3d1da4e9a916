package codeinterp

import (
	"context"
	"strings"
	"sync"
	"testing"
)

// fakeKernel is a scriptable kernel: it records what it runs, echoes the
// code as the text of a result, and blocks on code "block" until
// interrupted or released.
type fakeKernel struct {
	lang string
	cwd  string

	mu       sync.Mutex
	ran      []string // guarded by mu; "silent:" prefixed for silent executions
	running  int      // guarded by mu; concurrent executions, must stay <= 1
	maxConc  int      // guarded by mu
	interrup int      // guarded by mu

	release   chan struct{}
	interrupt chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newFakeKernel(lang, cwd string) *fakeKernel {
	return &fakeKernel{lang: lang, cwd: cwd, release: make(chan struct{}), interrupt: make(chan struct{}, 1), done: make(chan struct{})}
}

func (k *fakeKernel) Execute(ctx context.Context, code string, silent bool, emit func(Output)) error {
	k.mu.Lock()
	if silent {
		k.ran = append(k.ran, "silent:"+code)
	} else {
		k.ran = append(k.ran, code)
	}
	k.running++
	k.maxConc = max(k.maxConc, k.running)
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.running--
		k.mu.Unlock()
	}()
	if silent {
		return nil
	}
	switch code {
	case "block":
		select {
		case <-k.release:
		case <-k.interrupt:
			emit(errorLine("KeyboardInterrupt", "", ""))
		case <-k.done:
			return errKernelDied
		case <-ctx.Done():
			return ctx.Err()
		}
	case "die":
		k.Close()
		return errKernelDied
	case "ignore-interrupt":
		select {
		case <-k.done:
			return errKernelDied
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	emit(stdoutLine("out:"+code, ""))
	emit(Output{Type: typeResult, Text: k.lang + ":" + code, Result: &Result{IsMainResult: true}})
	return nil
}

func (k *fakeKernel) Interrupt() error {
	k.mu.Lock()
	k.interrup++
	k.mu.Unlock()
	select {
	case k.interrupt <- struct{}{}:
	default:
	}
	return nil
}

func (k *fakeKernel) Done() <-chan struct{} { return k.done }

func (k *fakeKernel) Close() error {
	k.closeOnce.Do(func() { close(k.done) })
	return nil
}

func (k *fakeKernel) history() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.ran...)
}

// fakeKernels starts fake kernels and remembers them.
type fakeKernels struct {
	mu      sync.Mutex
	started []*fakeKernel
	fail    error
}

func (f *fakeKernels) start(ctx context.Context, lang, cwd string) (kernel, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	k := newFakeKernel(lang, cwd)
	f.started = append(f.started, k)
	return k, nil
}

func (f *fakeKernels) last() *fakeKernel {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.started[len(f.started)-1]
}

func (f *fakeKernels) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.started)
}

func fakeServer(t *testing.T, cfg Config) (*client, *fakeKernels) {
	t.Helper()
	kernels := &fakeKernels{}
	if cfg.AgentURL == "" {
		cfg.AgentURL = "-"
	}
	cfg.Workdir = "/"
	cfg.Logger = testLogger(t)
	s, err := newServer(cfg, kernels.start)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, s), kernels
}

func contains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
