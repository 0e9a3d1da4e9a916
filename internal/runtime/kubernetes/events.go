package kubernetes

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/warrenhq/warren/internal/sandbox"
)

var metaGet = metav1.GetOptions{}

// resync is how often the informer replays its cache as updates; events
// come from the watch, so this is only a backstop against a missed one.
const resync = 5 * time.Minute

// startInformer follows the namespace's pods labelled as this runtime's:
// it wakes whoever waits for a pod to change (Create, Start) and feeds the
// subscribers of WatchContainers.
func (r *Runtime) startInformer() {
	r.factory = informers.NewSharedInformerFactoryWithOptions(r.cli, resync,
		informers.WithNamespace(r.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = r.selector() }))
	podInformer := r.factory.Core().V1().Pods()
	r.informer = podInformer.Informer()
	r.pods = podInformer.Lister().Pods(r.ns)
	r.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.wake(obj) },
		UpdateFunc: func(_, obj any) { r.wake(obj) },
		DeleteFunc: func(obj any) { r.wake(obj) },
	})
	r.factory.Start(r.ctx.Done())
}

func (r *Runtime) selector() string { return sandbox.LabelManaged + "=" + r.cfg.Instance }

// podOf returns the pod an informer notification is about, also when it
// is the tombstone of a deletion the informer missed.
func podOf(obj any) (*corev1.Pod, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	return p, ok
}

// wake tells everyone waiting on a pod that it changed.
func (r *Runtime) wake(obj any) {
	p, ok := podOf(obj)
	if !ok {
		return
	}
	r.mu.Lock()
	ws := r.waiters[p.Name]
	delete(r.waiters, p.Name)
	r.mu.Unlock()
	for _, w := range ws {
		close(w)
	}
}

// changed returns a channel closed at the next change of the named pod.
func (r *Runtime) changed(name string) <-chan struct{} {
	ch := make(chan struct{})
	r.mu.Lock()
	r.waiters[name] = append(r.waiters[name], ch)
	r.mu.Unlock()
	return ch
}

// WatchContainers reports the pods' changes that may leave a sandbox out
// of the state Warren recorded: a pod deleted, its sandbox container
// ended, frozen or thawed. The informer relists and rewatches by itself
// when its watch breaks, replaying what changed meanwhile, so the channel
// closes only when ctx ends.
func (r *Runtime) WatchContainers(ctx context.Context) (<-chan sandbox.ContainerEvent, error) {
	events := make(chan sandbox.ContainerEvent)
	var mu sync.Mutex // held while sending, so that events closes between sends
	closed := false
	send := func(ev sandbox.ContainerEvent) {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return
		}
		// client-go buffers each handler's notifications without bound,
		// so blocking here holds up no other subscriber nor the watch.
		select {
		case events <- ev:
		case <-ctx.Done():
		}
	}
	reg, err := r.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := podOf(oldObj)
			n, ok2 := podOf(newObj)
			if !ok1 || !ok2 {
				return
			}
			for _, a := range podChanges(o, n) {
				send(sandbox.ContainerEvent{ContainerID: n.Name, Action: a})
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := podOf(obj); ok {
				send(sandbox.ContainerEvent{ContainerID: p.Name, Action: sandbox.ContainerDestroyed})
			}
		},
	})
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindUnavailable, err, "cannot follow the sandboxes' pods")
	}
	go func() {
		<-ctx.Done()
		_ = r.informer.RemoveEventHandler(reg)
		mu.Lock()
		closed = true
		close(events)
		mu.Unlock()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), r.informer.HasSynced) {
		return nil, sandbox.Errorf(sandbox.KindUnavailable, "cannot list the sandboxes' pods")
	}
	return events, nil
}

// podChanges are the actions between two versions of a pod.
func podChanges(o, n *corev1.Pod) []sandbox.ContainerAction {
	var out []sandbox.ContainerAction
	if running(o) && !running(n) {
		out = append(out, sandbox.ContainerDied)
	}
	of, nf := o.Annotations[annotationFrozen] == "true", n.Annotations[annotationFrozen] == "true"
	switch {
	case !of && nf:
		out = append(out, sandbox.ContainerPaused)
	case of && !nf:
		out = append(out, sandbox.ContainerUnpaused)
	}
	return out
}
