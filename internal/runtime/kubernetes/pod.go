package kubernetes

import (
	"path"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Names inside a sandbox's pod.
const (
	sandboxContainer = "sandbox"
	agentVolume      = "warren-agent"
	// agentSecretEnv carries the agent secret into the container, as
	// under Docker.
	agentSecretEnv = "WARREN_AGENT_SECRET"
	// AgentImageBinary is the warren binary inside the agent image;
	// `warren node isolate --install-agent DEST` copies the agent beside
	// it to DEST.
	AgentImageBinary = "/warren"
)

// Annotations Warren keeps on a sandbox's pod.
const (
	// annotationFrozen is "true" while the node agent holds the pod's
	// cgroup frozen: the API has no word for it, and Inspect must say so.
	annotationFrozen = "dev.warren.frozen"
	// annotationPids is the process limit the node agent is to apply to
	// the pod's cgroup (the API has no per-pod limit).
	annotationPids = "dev.warren.pids-limit"
	// annotationImageID is the ID the image had in the builder's engine
	// when the pod was made: what the warm pool compares with the image's
	// ID now to tell a rebuilt one (the node's containerd names images
	// its own way).
	annotationImageID = "dev.warren.image-id"
)

// PodName is the name of a sandbox's pod, which is also the ID of its
// container as the lifecycle manager knows it.
func PodName(sandboxID string) string { return "warren-" + sandboxID }

// podFor returns the pod of a sandbox's spec.
func (r *Runtime) podFor(spec sandbox.ContainerSpec) *corev1.Pod {
	labels := spec.EngineLabels(r.cfg.Instance)

	no := false
	root := int64(0)
	grace := int64(2) // as the Docker engine's stop timeout
	pull := corev1.PullPolicy(r.cfg.PullPolicy)
	agentDir := path.Dir(AgentMountPath)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        PodName(spec.SandboxID),
			Namespace:   r.ns,
			Labels:      labels,
			Annotations: map[string]string{},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Hostname:      spec.SandboxID,
			// A sandbox gets no credentials to the cluster and no view of
			// its services.
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			DNSPolicy:                     corev1.DNSDefault,
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Volumes: []corev1.Volume{{
				Name:         agentVolume,
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
			}},
			InitContainers: []corev1.Container{r.initContainer(nil, spec.Runtime == sandbox.RuntimeGVisor)},
			Containers: []corev1.Container{{
				Name:            sandboxContainer,
				Image:           spec.Image,
				ImagePullPolicy: pull,
				// The agent replaces the image's entrypoint, and an explicit
				// command with no args drops the image's CMD too.
				Command: []string{AgentMountPath},
				Args:    slices.Clone(spec.AgentArgs),
				Env:     []corev1.EnvVar{{Name: agentSecretEnv, Value: spec.AgentSecret}},
				Ports: []corev1.ContainerPort{{
					Name: "agent", ContainerPort: sandbox.AgentPort, Protocol: corev1.ProtocolTCP,
				}},
				VolumeMounts: []corev1.VolumeMount{{Name: agentVolume, MountPath: agentDir, ReadOnly: true}},
				// Root whatever the image says, as under Docker: the agent
				// drops to users per process. Privilege escalation stays
				// allowed for sudo; the capability set is the Docker
				// engine's, everything else dropped.
				SecurityContext: &corev1.SecurityContext{
					RunAsUser:    &root,
					RunAsGroup:   &root,
					Privileged:   &no,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: capabilities(r.cfg.Caps)},
				},
				Resources:                r.resources(spec),
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
		},
	}
	if spec.Runtime == sandbox.RuntimeGVisor {
		class := r.cfg.GVisorRuntimeClass
		pod.Spec.RuntimeClassName = &class
	}
	mountClaims(pod, spec.Mounts)
	if spec.PidsLimit > 0 {
		pod.Annotations[annotationPids] = strconv.Itoa(spec.PidsLimit)
	}
	if spec.Labels[sandbox.LabelPool] != "" {
		pod.Spec.TopologySpreadConstraints = poolSpread(labels)
	}
	return pod
}

// mountClaims mounts the spec's volumes, whose Source is a
// PersistentVolumeClaim (Volumes.ClaimName), read-write into the sandbox
// container. A ReadWriteOnce claim's node affinity holds the pod to the
// volume's node; the scheduler sees to it.
func mountClaims(pod *corev1.Pod, mounts []sandbox.Mount) {
	c := &pod.Spec.Containers[0]
	for i, m := range mounts {
		name := "volume-" + strconv.Itoa(i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: m.Source},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: m.Target})
	}
}

// poolSpread spreads a server's warm pool pods evenly over the nodes they
// may run on, so that every node holds ready sandboxes and a burst of
// claims lands on all of them; a preference, which a full node overrides.
func poolSpread(labels map[string]string) []corev1.TopologySpreadConstraint {
	return []corev1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       corev1.LabelHostname,
		WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
			sandbox.LabelManaged: labels[sandbox.LabelManaged], sandbox.LabelPool: labels[sandbox.LabelPool],
		}},
	}}
}

func capabilities(names []string) []corev1.Capability {
	out := make([]corev1.Capability, len(names))
	for i, n := range names {
		out[i] = corev1.Capability(n)
	}
	return out
}

// resources are the spec's limits, and requests of RequestPercent of them.
func (r *Runtime) resources(spec sandbox.ContainerSpec) corev1.ResourceRequirements {
	req := corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}
	pct := int64(r.cfg.RequestPercent)
	if spec.CPUCount > 0 {
		milli := int64(spec.CPUCount) * 1000
		req.Limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
		req.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(max(milli*pct/100, 1), resource.DecimalSI)
	}
	if spec.MemoryMB > 0 {
		b := int64(spec.MemoryMB) << 20
		req.Limits[corev1.ResourceMemory] = *resource.NewQuantity(b, resource.BinarySI)
		req.Requests[corev1.ResourceMemory] = *resource.NewQuantity(b*pct/100, resource.BinarySI)
	}
	if spec.DiskMB > 0 {
		// The kubelet evicts a pod whose writable layer and emptyDirs
		// outgrow this: the closest the API comes to Docker's quota. The
		// request is explicit: left out, it is the limit, and a node of
		// 250 GB held 24 sandboxes of the default 10 GiB however little
		// they wrote (a burst of 50, with its pool, did not fit on the
		// test cluster's two nodes).
		b := int64(spec.DiskMB) << 20
		req.Limits[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(b, resource.BinarySI)
		req.Requests[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(b*pct/100, resource.BinarySI)
	}
	return req
}
