package kubernetes

import (
	"bufio"
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warrenhq/warren/internal/sandbox"
)

// cpuSample is what Stats remembers of a pod between calls, to turn
// cumulative CPU time into a percentage.
type cpuSample struct {
	at       time.Time
	cpuNanos uint64
}

// Stats samples a pod's CPU and memory through its node's agent (the API
// has no per-pod figures without a metrics server). CPUUsedPct is the
// share of the pod's CPUs used since the previous call (0 on the first);
// disk figures are left 0, as under Docker: the agent reports its disk.
func (r *Runtime) Stats(ctx context.Context, id string) (sandbox.Stats, error) {
	p, err := r.nodeOp(ctx, id, "sampling the resource use of")
	if err != nil {
		return sandbox.Stats{}, err
	}
	s, err := r.cfg.Nodes.Stats(ctx, p.Spec.NodeName, string(p.UID))
	if err != nil {
		return sandbox.Stats{}, err
	}
	now := time.Now()
	cpus := cpuLimit(p)
	if cpus == 0 {
		if q, ok := r.nodeCPUs(ctx, p.Spec.NodeName); ok {
			cpus = q
		}
	}
	out := sandbox.Stats{Time: now, CPUCount: max(1, int(cpus+0.5)), MemUsed: s.MemUsed, MemCache: s.MemCache, MemTotal: s.MemLimit}
	if out.MemTotal == 0 {
		out.MemTotal = memoryLimit(p)
	}
	r.mu.Lock()
	prev, known := r.samples[id]
	r.samples[id] = cpuSample{at: now, cpuNanos: s.CPUNanos}
	r.mu.Unlock()
	if known && now.After(prev.at) && s.CPUNanos >= prev.cpuNanos && cpus > 0 {
		wall := float64(now.Sub(prev.at).Nanoseconds())
		out.CPUUsedPct = min(100, float64(s.CPUNanos-prev.cpuNanos)/(wall*cpus)*100)
	}
	return out, nil
}

// nodeCPUs is a node's allocatable CPUs.
func (r *Runtime) nodeCPUs(ctx context.Context, node string) (float64, bool) {
	n, err := r.cli.CoreV1().Nodes().Get(ctx, node, metaGet)
	if err != nil {
		return 0, false
	}
	q, ok := n.Status.Allocatable[corev1.ResourceCPU]
	return float64(q.MilliValue()) / 1000, ok
}

func (r *Runtime) forgetSample(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.samples, id)
}

// Logs returns what the pod's sandbox container wrote at or after since,
// oldest first. The API merges stdout and stderr into one stream, so
// every line says stdout.
func (r *Runtime) Logs(ctx context.Context, id string, since time.Time) ([]sandbox.LogLine, error) {
	opts := &corev1.PodLogOptions{Container: sandboxContainer, Timestamps: true}
	if !since.IsZero() {
		t := metav1.NewTime(since)
		opts.SinceTime = &t
	}
	rc, err := r.cli.CoreV1().Pods(r.ns).GetLogs(id, opts).Stream(ctx)
	if err != nil {
		return nil, classify(err, "cannot read the sandbox's log")
	}
	defer rc.Close()
	var out []sandbox.LogLine
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		ts, text, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || t.Before(since) { // SinceTime has one-second precision
			continue
		}
		out = append(out, sandbox.LogLine{Time: t, Stream: "stdout", Text: text})
	}
	return out, classify(sc.Err(), "cannot read the sandbox's log")
}
