package kubernetes

import "github.com/warrenhq/warren/internal/sandbox"

// parallelStarts is how many pods the warm pool starts at once. A pod's
// start is its node's work (the kubelet, containerd, the init container
// and the agent), while the control plane only creates it and follows the
// informer; a start takes seconds (two container starts and the kubelet's
// status round trip), so a pool refilled as many at a time as the control
// plane's CPUs falls behind back-to-back creates.
const parallelStarts = 8

var _ sandbox.ParallelStarter = (*Runtime)(nil)

// ParallelStarts implements sandbox.ParallelStarter.
func (r *Runtime) ParallelStarts() int { return parallelStarts }
