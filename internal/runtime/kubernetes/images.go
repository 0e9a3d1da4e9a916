package kubernetes

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Images are answered by Config.Images: the Docker engine beside the
// control plane, where templates are built. A pod runs the image of that
// name on its node (imported there, or pulled from a registry), and is
// stamped with the ID the builder's engine gives it, which is what the
// warm pool compares to tell a rebuilt image.

// ImageExists reports whether the builder's engine has the image.
func (r *Runtime) ImageExists(ctx context.Context, ref string) (bool, error) {
	return r.cfg.Images.ImageExists(ctx, ref)
}

// ImageID returns the builder engine's ID of the image ref names.
func (r *Runtime) ImageID(ctx context.Context, ref string) (string, error) {
	return r.cfg.Images.ImageID(ctx, ref)
}

// ImageLabels returns the labels of the image ref names.
func (r *Runtime) ImageLabels(ctx context.Context, ref string) (map[string]string, error) {
	return r.cfg.Images.ImageLabels(ctx, ref)
}

// InspectImage returns the image the builder's engine finds for ref.
func (r *Runtime) InspectImage(ctx context.Context, ref string) (sandbox.Image, error) {
	return r.cfg.Images.InspectImage(ctx, ref)
}

// RemoveImage removes an image from the builder's engine.
func (r *Runtime) RemoveImage(ctx context.Context, ref string) error {
	return r.cfg.Images.RemoveImage(ctx, ref)
}

// CheckRuntime checks that the cluster can run sandboxes under rt: for
// gVisor, that its RuntimeClass exists.
func (r *Runtime) CheckRuntime(ctx context.Context, rt sandbox.OCIRuntime) error {
	if rt != sandbox.RuntimeGVisor {
		return nil
	}
	_, err := r.cli.NodeV1().RuntimeClasses().Get(ctx, r.cfg.GVisorRuntimeClass, metaGet)
	if apierrors.IsNotFound(err) {
		return sandbox.Errorf(sandbox.KindUnavailable, "the cluster has no RuntimeClass %q: apply deploy/kubernetes/runtimeclass-gvisor.yaml on nodes with runsc, or pass --gvisor-runtime-class", r.cfg.GVisorRuntimeClass)
	}
	return classify(err, "cannot read the gVisor RuntimeClass")
}
