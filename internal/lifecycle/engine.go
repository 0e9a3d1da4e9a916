package lifecycle

import (
	"context"

	"github.com/warrenhq/warren/internal/sandbox"
)

// capabilities are the optional parts of the engine the manager was given
// (see sandbox.Runtime), looked up once in New; a nil field is one the
// engine lacks, and each use below says what the manager does without it.
type capabilities struct {
	freezer      sandbox.Freezer
	committer    sandbox.Committer
	stats        sandbox.StatsReader
	logs         sandbox.LogReader
	checkpointer sandbox.Checkpointer
	checker      sandbox.RuntimeChecker
	events       sandbox.EventWatcher
	memory       sandbox.MemoryCloner
	files        sandbox.FileCopier
	forks        sandbox.ForkLister
}

func capabilitiesOf(rt sandbox.Runtime) capabilities {
	var c capabilities
	c.freezer, _ = rt.(sandbox.Freezer)
	c.committer, _ = rt.(sandbox.Committer)
	c.stats, _ = rt.(sandbox.StatsReader)
	c.logs, _ = rt.(sandbox.LogReader)
	c.checkpointer, _ = rt.(sandbox.Checkpointer)
	c.checker, _ = rt.(sandbox.RuntimeChecker)
	c.events, _ = rt.(sandbox.EventWatcher)
	c.memory, _ = rt.(sandbox.MemoryCloner)
	c.files, _ = rt.(sandbox.FileCopier)
	c.forks, _ = rt.(sandbox.ForkLister)
	return c
}

// freeze freezes container id. An engine without a Freezer never gets
// here for a pause (see pause), only to re-freeze or fall back, where the
// error makes the caller stop the container or leave it be.
func (c capabilities) freeze(ctx context.Context, id string) error {
	if c.freezer == nil {
		return sandbox.Errorf(sandbox.KindUnavailable, "the engine cannot freeze containers")
	}
	return c.freezer.Freeze(ctx, id)
}

// thaw thaws frozen container id; only a Freezer froze it.
func (c capabilities) thaw(ctx context.Context, id string) error {
	if c.freezer == nil {
		return sandbox.Errorf(sandbox.KindUnavailable, "the engine cannot thaw containers")
	}
	return c.freezer.Thaw(ctx, id)
}

// errNoCommit refuses a snapshot or a fork, before anything is changed,
// on an engine without a Committer.
var errNoCommit = sandbox.Errorf(sandbox.KindUnavailable, "this server's engine cannot save a sandbox's filesystem: snapshots and forks are unavailable")
