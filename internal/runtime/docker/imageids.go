package docker

import (
	"context"
	"sync"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"
)

// imageIDs keeps the engine's answers to ImageID while the Runtime
// follows the engine's image events. Every pooled create asks for its
// image's ID (a pooled container of a rebuilt image must not be claimed),
// and during a burst the engine, busy starting and removing containers,
// took 1–13 ms p50 and up to 89 ms p90 to answer an inspect whose answer
// had not changed (bench/fairness). An image event of any kind (tag,
// untag, delete, import, load, pull) forgets every answer, so a build or
// a removal behind the server's back is seen as soon as its event
// arrives, and the Runtime's own builds, commits, loads and removals
// forget them when they return (imagesChanged), before their events;
// while no event stream is open nothing is kept.
type imageIDs struct {
	mu       sync.Mutex
	ids      map[string]string // by reference, as asked
	watching bool              // the event stream is open: answers may be kept
	gen      uint64            // changes with every event and every change of watching
	started  bool              // the watch runs (it starts at the first ImageID)
}

// imageWatchRetry is how long the watch waits before it follows the
// engine's events again after their stream ended.
const imageWatchRetry = time.Second

// ImageID returns the ID of the image ref names.
func (r *Runtime) ImageID(ctx context.Context, ref string) (string, error) {
	m := &r.images
	m.mu.Lock()
	if id, ok := m.ids[ref]; ok {
		m.mu.Unlock()
		return id, nil
	}
	gen, start := m.gen, !m.started
	m.started = true
	m.mu.Unlock()
	if start {
		go r.watchImages()
	}
	res, err := r.cli.ImageInspect(ctx, ref)
	if err != nil {
		return "", classify(err, "cannot inspect the image")
	}
	m.mu.Lock()
	// An event since the question (gen moved) may have changed the answer.
	if m.watching && m.gen == gen {
		m.ids[ref] = res.ID
	}
	m.mu.Unlock()
	return res.ID, nil
}

// watchImages follows the engine's image events until the Runtime is
// closed, forgetting the kept answers at each, and following them again
// imageWatchRetry after their stream ends.
func (r *Runtime) watchImages() {
	filters := client.Filters{}.Add("type", string(events.ImageEventType))
	for r.ctx.Err() == nil {
		ctx, cancel := context.WithCancel(r.ctx)
		res := r.cli.Events(ctx, client.EventsListOptions{Filters: filters})
		select {
		case <-res.Err:
		default:
			r.images.forget(true)
			r.followImageEvents(res)
		}
		cancel()
		r.images.forget(false)
		select {
		case <-r.ctx.Done():
		case <-time.After(imageWatchRetry):
		}
	}
}

// followImageEvents forgets the kept answers at each event until the
// stream ends.
func (r *Runtime) followImageEvents(res client.EventsResult) {
	for {
		select {
		case <-res.Messages:
			r.images.forget(true)
		case err := <-res.Err:
			if r.ctx.Err() == nil {
				r.log.Debug("the engine's image event stream ended; image IDs are asked again until it is followed", "err", err)
			}
			return
		}
	}
}

// imagesChanged forgets the kept answers to ImageID: an image of the
// engine was built, committed, loaded or removed.
func (r *Runtime) imagesChanged() {
	m := &r.images
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ids = map[string]string{}
	m.gen++
}

// forget drops every kept answer; watching says whether answers may be
// kept from now on.
func (m *imageIDs) forget(watching bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ids = map[string]string{}
	m.watching = watching
	m.gen++
}
