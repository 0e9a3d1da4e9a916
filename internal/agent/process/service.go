// Package process implements the agent's Connect process.Process service:
// it starts commands and PTYs as sandbox users, streams their output to
// every attached client, takes their input and signals, and remembers them
// for a short while after they exit so late clients still see the end.
//
// It does not decide who may call it (the HTTP layer checks the access
// token) nor which user is the default (internal/agent/state owns that).
package process

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/agent/state"
	"github.com/warrenhq/warren/proto/process"
	"github.com/warrenhq/warren/proto/process/processconnect"
)

// exitedRetention is how long an exited process can still be reattached
// to (Connect replays its start and end); envd keeps them 30 s.
const exitedRetention = 30 * time.Second

// Service implements processconnect.ProcessHandler. It is safe for
// concurrent use; Close must be called once when the agent stops.
type Service struct {
	st  *state.State
	log *slog.Logger

	// ctx parents every process context, so Close kills them all.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // one waiter goroutine per started process

	mu     sync.Mutex
	procs  map[uint32]*proc // guarded by mu; running and recently exited, by pid
	closed bool             // guarded by mu; set by Close, after which nothing is tracked
	retain time.Duration    // guarded by mu; how long exited processes stay, exitedRetention outside tests
}

var _ processconnect.ProcessHandler = (*Service)(nil)

// New returns a service that runs processes with the settings in st.
func New(st *state.State, log *slog.Logger) *Service {
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{
		st:     st,
		log:    log,
		ctx:    ctx,
		cancel: cancel,
		retain: exitedRetention,
		procs:  map[uint32]*proc{},
	}
}

// Close kills running processes, waits for them to be reaped and stops the
// timers that forget exited ones.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, p := range s.procs {
		p.stopForgetting()
		delete(s.procs, pid)
	}
}

// List returns the running processes with the config they were started with.
func (s *Service) List(_ context.Context, _ *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := &process.ListResponse{}
	for _, p := range s.procs {
		if p.ended() {
			continue
		}
		res.Processes = append(res.Processes, p.info())
	}
	return connect.NewResponse(res), nil
}

// register makes p findable by pid and tag and runs track, which follows
// it to its end, in a goroutine Close waits for. It reports false, doing
// nothing, once Close has begun. A recently exited process whose pid the
// kernel reused is forgotten early.
func (s *Service) register(p *proc, track func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if old, ok := s.procs[p.pid]; ok {
		old.stopForgetting()
	}
	s.procs[p.pid] = p
	s.wg.Go(track)
	return true
}

// forgetLater drops p from the registry once the retention has passed.
func (s *Service) forgetLater(p *proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.procs[p.pid] != p {
		return
	}
	p.forget = time.AfterFunc(s.retain, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.procs[p.pid] == p {
			delete(s.procs, p.pid)
		}
	})
}

// find resolves a selector. With running set, exited processes count as
// not found: they can no longer take input or signals.
func (s *Service) find(sel *process.ProcessSelector, running bool) (*proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch v := sel.GetSelector().(type) {
	case *process.ProcessSelector_Pid:
		if p, ok := s.procs[v.Pid]; ok && (!running || !p.ended()) {
			return p, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", v.Pid))
	case *process.ProcessSelector_Tag:
		// Tags need not be unique; prefer a running process, then the newest.
		var best *proc
		for _, p := range s.procs {
			if p.tag == nil || *p.tag != v.Tag || (running && p.ended()) {
				continue
			}
			if best == nil || (best.ended() && !p.ended()) || (best.ended() == p.ended() && p.started.After(best.started)) {
				best = p
			}
		}
		if best == nil {
			return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %s not found", v.Tag))
		}
		return best, nil
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("a process selector (pid or tag) is required"))
	}
}
