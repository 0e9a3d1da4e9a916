package docker

import (
	"context"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

// WatchContainers follows the engine's event stream, filtered by the
// engine itself to this server's containers and the actions of
// sandbox.ContainerAction.
func (r *Runtime) WatchContainers(ctx context.Context) (<-chan sandbox.ContainerEvent, error) {
	ctx, cancel := context.WithCancel(ctx)
	filters := client.Filters{}.
		Add("type", string(events.ContainerEventType)).
		Add("label", sandbox.LabelManaged+"="+r.cfg.Instance).
		Add("event", string(sandbox.ContainerDied), string(sandbox.ContainerDestroyed),
			string(sandbox.ContainerPaused), string(sandbox.ContainerUnpaused))
	// Events returns once the engine answered, or failed to.
	res := r.cli.Events(ctx, client.EventsListOptions{Filters: filters})
	select {
	case err := <-res.Err:
		cancel()
		return nil, classify(err, "cannot follow the engine's events")
	default:
	}
	out := make(chan sandbox.ContainerEvent)
	go func() {
		defer close(out)
		defer cancel()
		for {
			select {
			case msg := <-res.Messages:
				select {
				case out <- sandbox.ContainerEvent{ContainerID: msg.Actor.ID, Action: sandbox.ContainerAction(msg.Action)}:
				case <-ctx.Done():
					return
				}
			case err := <-res.Err:
				if ctx.Err() == nil {
					r.log.Debug("docker event stream ended", "err", err)
				}
				return
			}
		}
	}()
	return out, nil
}
