package lifecycle

import (
	"context"
	"sync"
	"time"
)

// The creates of a burst share their engine inspects of an image: its ID,
// which a claim from the warm pool checks, and its labels, which say the
// runtime it needs (flights).

// flights runs one call per key at a time and gives its result to every
// caller that asked while it ran.
type flights[T any] struct {
	mu    sync.Mutex
	calls map[string]*flight[T]
}

type flight[T any] struct {
	done chan struct{}
	v    T
	err  error
}

// do returns fn's result for key: of a call already running, or of a new
// one. A result is never kept after its call: one that began before an
// image was rebuilt is not given to a caller that asked after it ended.
func (f *flights[T]) do(key string, fn func() (T, error)) (T, error) {
	f.mu.Lock()
	if c, ok := f.calls[key]; ok {
		f.mu.Unlock()
		<-c.done
		return c.v, c.err
	}
	if f.calls == nil {
		f.calls = map[string]*flight[T]{}
	}
	c := &flight[T]{done: make(chan struct{})}
	f.calls[key] = c
	f.mu.Unlock()
	c.v, c.err = fn()
	f.mu.Lock()
	delete(f.calls, key)
	f.mu.Unlock()
	close(c.done)
	return c.v, c.err
}

// imageID returns the ID of image, sharing the engine's inspect with the
// concurrent callers that ask for the same image. The inspect runs
// without the first caller's cancellation, which the others do not share.
func (m *Manager) imageID(ctx context.Context, image string) (string, error) {
	return m.imageIDs.do(image, func() (string, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return m.cfg.Runtime.ImageID(ctx, image)
	})
}

// imageLabels returns image's labels as imageID does its ID.
func (m *Manager) imageLabels(ctx context.Context, image string) (map[string]string, error) {
	return m.imageLabelSets.do(image, func() (map[string]string, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return m.cfg.Runtime.ImageLabels(ctx, image)
	})
}
