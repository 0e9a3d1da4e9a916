package codeinterp

import (
	"context"
	"errors"
	"time"
)

// silentTimeout bounds the env var executions around user code; they do
// nothing slow, so a kernel that takes longer is broken.
const silentTimeout = 30 * time.Second

// errInterruptIgnored ends an execution whose kernel kept running after it
// was interrupted for longer than the grace period.
var errInterruptIgnored = errors.New("the kernel ignored the interrupt")

// execute runs one /execute request on the context, writing its outputs to
// out. token is the X-Access-Token the request carried, for /envs.
func (c *codeContext) execute(ctx context.Context, req executeRequest, token string, out *stream) {
	if err := c.acquire(ctx); err != nil {
		return // the client left while queued; nothing ran
	}
	defer c.release()
	k, err := c.kernel()
	if err != nil {
		c.srv.log.Error("no kernel for execution", "context", c.ID, "err", err)
		out.Emit(errorLine("KernelError", err.Error(), ""))
		return
	}
	if err := c.loadEnvs(ctx, k, token); err != nil {
		c.fail(k, err, out)
		return
	}
	if len(req.EnvVars) > 0 {
		if err := c.silent(k, envOverrideCode(c.Language, req.EnvVars)); err != nil {
			c.fail(k, err, out)
			return
		}
	}
	if err := c.run(ctx, k, req.Code, out.Emit); err != nil {
		c.fail(k, err, out)
		return
	}
	if len(req.EnvVars) > 0 {
		if err := c.silent(k, envRestoreCode(c.Language, req.EnvVars)); err != nil {
			c.fail(k, err, out)
		}
	}
}

// run executes user code. When ctx ends (the client disconnected) the
// kernel is interrupted; if it does not stop within the grace period the
// execution is abandoned and the kernel must go.
func (c *codeContext) run(ctx context.Context, k kernel, code string, emit func(Output)) error {
	runCtx, cancel := context.WithCancel(c.srv.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		c.srv.log.Info("client left during execution; interrupting kernel", "context", c.ID)
		if err := k.Interrupt(); err != nil {
			c.srv.log.Warn("interrupting kernel", "context", c.ID, "err", err)
		}
		t := time.NewTimer(c.srv.cfg.InterruptGrace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-runCtx.Done():
		}
	})
	defer stop()
	err := k.Execute(runCtx, code, false, emit)
	if err != nil && runCtx.Err() != nil && ctx.Err() != nil {
		return errInterruptIgnored
	}
	return err
}

func (c *codeContext) silent(k kernel, code string) error {
	ctx, cancel := context.WithTimeout(c.srv.ctx, silentTimeout)
	defer cancel()
	return k.Execute(ctx, code, true, nil)
}

// loadEnvs applies the sandbox-wide env vars to a kernel once, fetching
// them from the agent with the caller's token. A failed fetch is retried
// on the next execution rather than failing this one.
func (c *codeContext) loadEnvs(ctx context.Context, k kernel, token string) error {
	c.mu.Lock()
	loaded := c.envsLoaded
	c.mu.Unlock()
	if loaded {
		return nil
	}
	vars, err := c.srv.envs.fetch(ctx, token)
	if err != nil {
		c.srv.log.Warn("loading sandbox env vars", "context", c.ID, "err", err)
		return nil
	}
	if len(vars) > 0 {
		if err := c.silent(k, envSetCode(c.Language, vars)); err != nil {
			return err
		}
	}
	c.mu.Lock()
	if c.k == k {
		c.envsLoaded = true
	}
	c.mu.Unlock()
	return nil
}

// fail reports an execution that did not end normally and replaces the
// kernel, which is dead or in an unknown state.
func (c *codeContext) fail(k kernel, err error, out *stream) {
	c.dropKernel(k)
	switch {
	case c.isRemoved():
		out.Emit(errorLine(errExecutionAborted, "The context was removed during the execution.", ""))
		return
	case errors.Is(err, errKernelDied):
		c.srv.log.Warn("kernel died during execution; restarting it", "context", c.ID)
		out.Emit(errorLine(errContextRestarting, "The kernel exited during the execution and is being restarted; its state is lost.", ""))
	default:
		c.srv.log.Warn("execution failed; restarting kernel", "context", c.ID, "err", err)
		out.Emit(errorLine(errUnexpectedEnd, "The execution ended unexpectedly ("+err.Error()+"); the kernel is being restarted.", ""))
	}
	c.srv.background(c.warm)
}
