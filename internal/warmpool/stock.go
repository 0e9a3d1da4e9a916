package warmpool

import (
	"slices"
	"sync"

	"github.com/warrenhq/warren/internal/sandbox"
)

// pooled is a started container waiting for a sandbox.
type pooled struct {
	kind      string // its kind's template
	sandboxID string
	secret    string // its agent secret
	container sandbox.Container
	imageID   string
	runtime   sandbox.OCIRuntime
	limits    limits // what it was made with; zero when adopted (unknown)
	// prepared says its agent answered and took the server's CA once it
	// was made (prepareAgent), so a claim inits it at once, without the
	// CA; false when adopted.
	prepared bool
}

type limits struct{ cpu, memMB, pids int }

// stock is the pool's bookkeeping: the containers that wait, and those
// being made or claimed.
type stock struct {
	mu    sync.Mutex      // guards ready, busy and made
	ready []pooled        // oldest first
	busy  map[string]bool // sandbox IDs being made for, or claimed from, the pool
	// made holds the kinds whose latest container was made without an
	// error: a refill makes several of them at once from its start.
	made map[string]bool
	kick chan struct{} // wakes the refill loop; buffered
	// added is closed, and replaced, whenever a container is put in
	// ready: creates waiting at the cold gate then try to claim it.
	added chan struct{}
}

func newStock() *stock {
	return &stock{busy: map[string]bool{}, made: map[string]bool{}, kick: make(chan struct{}, 1), added: make(chan struct{})}
}

// readied returns a channel closed when the next container is put in the
// pool.
func (s *stock) readied() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.added
}

// madeOK reports whether kind's latest container was made without an
// error.
func (s *stock) madeOK(kind string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.made[kind]
}

func (s *stock) setMade(kind string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok {
		s.made[kind] = true
	} else {
		delete(s.made, kind)
	}
}

// knows reports whether id is a pooled container's, or one being made or
// claimed.
func (s *stock) knows(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy[id] || slices.ContainsFunc(s.ready, func(e pooled) bool { return e.sandboxID == id })
}

// holds reports whether container id waits in the pool.
func (s *stock) holds(containerID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.ready, func(e pooled) bool { return e.container.ID == containerID })
}

func (s *stock) setBusy(id string, busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if busy {
		s.busy[id] = true
	} else {
		delete(s.busy, id)
	}
}

// put adds e unless the pool already holds max of its kind; it reports
// whether it did.
func (s *stock) put(e pooled, max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.countLocked(e.kind) >= max {
		return false
	}
	s.ready = append(s.ready, e)
	close(s.added)
	s.added = make(chan struct{})
	return true
}

// take removes the oldest container of kind running imageID under rt,
// unless no more than keep such wait, and marks its sandbox ID busy; the
// claimer clears it with setBusy.
func (s *stock) take(kind, imageID string, rt sandbox.OCIRuntime, keep int) (pooled, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wake() // a miss too: the pool may need refilling with a new image
	fits := func(e pooled) bool { return e.kind == kind && e.imageID == imageID && e.runtime == rt }
	i := slices.IndexFunc(s.ready, fits)
	if i < 0 || keep > 0 && countFunc(s.ready, fits) <= keep {
		return pooled{}, false
	}
	e := s.ready[i]
	s.ready = slices.Delete(s.ready, i, i+1)
	s.busy[e.sandboxID] = true
	return e, true
}

// dropNewest removes the entries gone accepts, asking of the newest
// first, and returns them.
func (s *stock) dropNewest(gone func(pooled) bool) []pooled {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []pooled
	for i := len(s.ready) - 1; i >= 0; i-- {
		if gone(s.ready[i]) {
			out = append(out, s.ready[i])
			s.ready = slices.Delete(s.ready, i, i+1)
		}
	}
	return out
}

// drop removes the entries keep rejects and returns them.
func (s *stock) drop(keep func(pooled) bool) []pooled {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []pooled
	s.ready = slices.DeleteFunc(s.ready, func(e pooled) bool {
		if keep(e) {
			return false
		}
		gone = append(gone, e)
		return true
	})
	return gone
}

func (s *stock) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ready)
}

// count returns how many containers of kind are ready.
func (s *stock) count(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.countLocked(kind)
}

func (s *stock) countLocked(kind string) int {
	n := 0
	for _, e := range s.ready {
		if e.kind == kind {
			n++
		}
	}
	return n
}

func (s *stock) entries() []pooled {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ready)
}

// wake asks the refill loop to run; the caller may hold s.mu.
func (s *stock) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func countFunc[T any](s []T, f func(T) bool) int {
	n := 0
	for _, v := range s {
		if f(v) {
			n++
		}
	}
	return n
}
