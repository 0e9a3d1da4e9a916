package codeinterp

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// codeContext is one stateful kernel session as E2B's clients see it: an
// id, a language and a working directory. Its kernel is started lazily and
// replaced when it dies.
type codeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`

	srv *Server
	seq uint64 // order of creation: GET /contexts lists the newest last
	// turn serializes executions, restarts and starts: a token in the
	// channel is the right to use the kernel. A channel rather than a
	// mutex so that a request can stop waiting when its client leaves.
	turn chan struct{}

	mu         sync.Mutex
	k          kernel // guarded by mu; nil until started or after a death
	envsLoaded bool   // guarded by mu; sandbox-wide env vars were applied to k
	removed    bool   // guarded by mu; the context was deleted
}

func newCodeContext(srv *Server, id, lang, cwd string) *codeContext {
	return &codeContext{ID: id, Language: lang, Cwd: cwd, srv: srv, seq: srv.seq.Add(1), turn: make(chan struct{}, 1)}
}

func (c *codeContext) acquire(ctx context.Context) error {
	select {
	case c.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *codeContext) release() { <-c.turn }

// kernel returns the running kernel, starting one if there is none. The
// caller holds the turn.
func (c *codeContext) kernel() (kernel, error) {
	c.mu.Lock()
	k, removed := c.k, c.removed
	c.mu.Unlock()
	if removed {
		return nil, fmt.Errorf("context %s was removed", c.ID)
	}
	if k != nil && !isDone(k.Done()) {
		return k, nil
	}
	if k != nil {
		k.Close()
	}
	ctx, cancel := context.WithTimeout(c.srv.ctx, c.srv.cfg.StartTimeout)
	defer cancel()
	start := time.Now()
	k, err := c.srv.start(ctx, c.Language, c.Cwd)
	if err != nil {
		return nil, fmt.Errorf("start %s kernel: %w", c.Language, err)
	}
	c.srv.log.Info("kernel started", "context", c.ID, "language", c.Language, "took", time.Since(start))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removed { // deleted while starting
		k.Close()
		return nil, fmt.Errorf("context %s was removed", c.ID)
	}
	c.k, c.envsLoaded = k, false
	return k, nil
}

// dropKernel kills the kernel, if it is still k, so the next execution
// starts a fresh one.
func (c *codeContext) dropKernel(k kernel) {
	c.mu.Lock()
	if c.k == k {
		c.k = nil
	}
	c.mu.Unlock()
	k.Close()
}

// kill kills the current kernel at once, whoever holds the turn: a running
// execution then ends with ContextRestarting.
func (c *codeContext) kill(remove bool) {
	c.mu.Lock()
	k := c.k
	c.k = nil
	c.removed = c.removed || remove
	c.mu.Unlock()
	if k != nil {
		k.Close()
	}
}

// restart replaces the kernel with a fresh one.
func (c *codeContext) restart(ctx context.Context) error {
	c.kill(false)
	if err := c.acquire(ctx); err != nil {
		return err
	}
	defer c.release()
	_, err := c.kernel()
	return err
}

// warm starts the kernel in the background, if none runs, so that the
// next execution does not wait for it.
func (c *codeContext) warm() {
	if c.acquire(c.srv.ctx) != nil {
		return
	}
	defer c.release()
	if _, err := c.kernel(); err != nil && c.srv.ctx.Err() == nil {
		c.srv.log.Warn("starting kernel in the background", "context", c.ID, "err", err)
	}
}

func (c *codeContext) isRemoved() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.removed
}
