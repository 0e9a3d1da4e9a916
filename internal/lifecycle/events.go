package lifecycle

import (
	"context"
	"log/slog"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Following the engine's events: a container killed, stopped, frozen or
// removed behind Warren's back is reconciled within moments instead of at
// the next periodic reconcile, which stays as the backstop. An event only
// says which container to look at: its sandbox is reconciled exactly as
// the periodic reconcile would, under its lock and from a fresh
// inspection, so the events of Warren's own operations (a pause stops or
// freezes the container) find the sandbox already in the state they
// left, and change nothing.

// Backoff of resubscribing to a runtime whose event stream broke or
// refuses (an engine restart): short, since a subscription costs little
// and events missed are caught up by a reconcile once it is back.
const (
	watchBackoffMin = 250 * time.Millisecond
	watchBackoffMax = 5 * time.Second
)

// subscribe opens the runtime's event stream, when it has one; nil when
// it has none or refused (watchEvents retries).
func (m *Manager) subscribe(ctx context.Context) <-chan sandbox.ContainerEvent {
	w := m.caps.events
	if w == nil {
		return nil
	}
	events, err := w.WatchContainers(ctx)
	if err != nil {
		m.log.Warn("cannot follow the engine's container events; retrying", "err", err)
		return nil
	}
	return events
}

// watchEvents handles the events of the stream subscribe opened, then
// resubscribes each time it breaks and reconciles everything once it is
// back, until ctx ends. The first retry after a stream that lived is
// immediate, later ones back off, so an engine that is down, or that
// accepts and drops streams, costs little.
func (m *Manager) watchEvents(ctx context.Context, events <-chan sandbox.ContainerEvent) {
	w := m.caps.events
	if w == nil {
		return
	}
	var backoff time.Duration // 0 after a stream that lived
	for {
		if events != nil {
			opened := time.Now()
			for ev := range events {
				m.wg.Go(func() { m.containerChanged(ctx, ev) })
			}
			if ctx.Err() != nil {
				return
			}
			if time.Since(opened) >= watchBackoffMax {
				backoff = 0
			}
			m.log.Log(ctx, quietAfterFirst(backoff), "the engine's container event stream ended; resubscribing")
		}
		failed := false
		for events = nil; events == nil; backoff = min(max(2*backoff, watchBackoffMin), watchBackoffMax) {
			if !sleep(ctx, backoff) {
				return
			}
			var err error
			if events, err = w.WatchContainers(ctx); err != nil {
				m.log.Log(ctx, quietAfterFirst(backoff), "cannot follow the engine's container events", "err", err)
				failed = true
			}
		}
		if failed {
			m.log.Info("following the engine's container events again")
		}
		// What happened while no stream was open.
		if err := m.Reconcile(ctx); err != nil {
			m.log.Warn("reconcile failed", "err", err)
		}
	}
}

// quietAfterFirst is the level of a retry's log: a warning for the first
// of a run, debug for the rest.
func quietAfterFirst(backoff time.Duration) slog.Level {
	if backoff == 0 {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

// containerChanged reconciles the sandbox or pooled container an event is
// about; events of containers neither knows (strays) are left to the
// periodic reconcile.
func (m *Manager) containerChanged(ctx context.Context, ev sandbox.ContainerEvent) {
	for _, sb := range m.snapshotAll() {
		if sb.ContainerID == ev.ContainerID && sb.State != sandbox.StateKilled {
			m.log.Debug("container event", logkey.Sandbox, sb.ID, logkey.Container, ev.ContainerID, "action", string(ev.Action))
			m.reconcileOne(ctx, sb.ID)
			return
		}
	}
	m.pool.ContainerChanged(ctx, ev.ContainerID)
}

// sleep waits d and reports true, or false as soon as ctx ends.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
