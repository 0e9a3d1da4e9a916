package kubernetes

import (
	"context"

	"github.com/warrenhq/warren/internal/sandbox"
)

// errStop is why a pod cannot be stopped: a pod's containers cannot stop
// and start again keeping their filesystem. That takes committing the
// filesystem to an image on the node and a new pod from it, which the
// node agent does not do yet.
var errStop = sandbox.Errorf(sandbox.KindUnavailable,
	"pausing without memory (stopped) is not available on the Kubernetes engine: a pod cannot stop and keep its files; pause keeping memory (frozen) instead")

// Start returns a running pod as it is (the manager adopts it); a pod that
// does not run cannot be started again.
func (r *Runtime) Start(ctx context.Context, id string) (sandbox.Container, error) {
	c, err := r.Inspect(ctx, id)
	if err != nil {
		return sandbox.Container{}, err
	}
	if !c.Running {
		return sandbox.Container{}, errStop
	}
	return c, nil
}

// Stop is unavailable (see errStop): the pod is left as it is.
func (r *Runtime) Stop(ctx context.Context, id string) error {
	if _, err := r.get(ctx, id); err != nil {
		return err
	}
	return errStop
}
