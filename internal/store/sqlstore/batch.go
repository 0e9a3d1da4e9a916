package sqlstore

import (
	"context"
	"errors"
)

// Both adapters commit the writes of a sandbox's life in batches (a group
// commit): writes that arrive while a batch is committed go together in
// the next transaction. How a batch commits is each adapter's own;
// handing a write to a writer, and a writer taking its next batch, are
// the same, and here.

// ErrClosed is what a write after its store's Close returns.
var ErrClosed = errors.New("the store is closed")

// Pending is a write waiting for a writer: Op, what the adapter runs, and
// Err, how it went, which the writer's commit sets.
type Pending[Op any] struct {
	Ctx  context.Context
	Op   Op
	Err  error
	done chan struct{}
}

// Submit hands op to the writer that takes from writes and returns its
// error once the writer is done with it. A write not taken before closing
// is closed (ErrClosed) or ctx ends is not run.
func Submit[Op any](ctx context.Context, writes chan<- *Pending[Op], closing <-chan struct{}, op Op) error {
	p := &Pending[Op]{Ctx: ctx, Op: op, done: make(chan struct{})}
	select {
	case writes <- p:
	case <-closing:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	<-p.done
	return p.Err
}

// RunWriter is a writer: it takes the writes on writes in batches until
// closing is closed, each batch the write it waited for and those that
// already wait behind it, up to max in all, and runs commit on each,
// which sets every write's Err, before their Submit returns.
func RunWriter[Op any](writes <-chan *Pending[Op], closing <-chan struct{}, max int, commit func([]*Pending[Op])) {
	for {
		batch, ok := nextBatch(writes, closing, max)
		if !ok {
			return
		}
		commit(batch)
		for _, p := range batch {
			close(p.done)
		}
	}
}

// nextBatch waits for a write on writes and returns it with those that
// already wait behind it, up to max in all; ok is false once closing is
// closed.
func nextBatch[W any](writes <-chan W, closing <-chan struct{}, max int) (batch []W, ok bool) {
	select {
	case w := <-writes:
		batch = append(batch, w)
	case <-closing:
		return nil, false
	}
	for len(batch) < max {
		select {
		case w := <-writes:
			batch = append(batch, w)
		default:
			return batch, true
		}
	}
	return batch, true
}
