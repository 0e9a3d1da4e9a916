package filesystem

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	pb "github.com/warrenhq/warren/proto/filesystem"
)

// defaultKeepalive is how often an idle stream sends a keepalive when the
// client names no interval (matching envd's 90 s).
const defaultKeepalive = 90 * time.Second

// maxPolledEvents bounds what a polling watcher holds between polls; a
// client that stops polling loses the oldest events, not the agent's memory.
const maxPolledEvents = 10_000

// WatchDir streams changes below a directory until the request ends.
func (s *Service) WatchDir(ctx context.Context, req *connect.Request[pb.WatchDirRequest], stream *connect.ServerStream[pb.WatchDirResponse]) error {
	u, abs, err := s.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return err
	}
	w, err := s.startWatch(u, abs, watchOptions{
		recursive:    req.Msg.GetRecursive(),
		includeEntry: req.Msg.GetIncludeEntry(),
		allowNetwork: req.Msg.GetAllowNetworkMounts(),
	})
	if err != nil {
		return err
	}
	defer w.close()

	reqCtx := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sendMu sync.Mutex
	var sendErr error
	send := func(m *pb.WatchDirResponse) {
		sendMu.Lock()
		defer sendMu.Unlock()
		if sendErr != nil {
			return
		}
		if sendErr = stream.Send(m); sendErr != nil {
			cancel()
		}
	}
	send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Start{Start: &pb.WatchDirResponse_StartEvent{}}})

	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(keepaliveInterval(req.Header().Get("Keepalive-Ping-Interval")))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Keepalive{Keepalive: &pb.WatchDirResponse_KeepAlive{}}})
			}
		}
	})
	err = w.run(ctx, func(e *pb.FilesystemEvent) {
		send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Filesystem{Filesystem: e}})
	})
	cancel()
	wg.Wait()
	if err == nil {
		// A request that ran out of time ends so, not as a watch the
		// agent closed (deadline_exceeded, as when the client's own
		// deadline comes first).
		err = reqCtx.Err()
	}
	return err
}

// keepaliveInterval parses the SDK's Keepalive-Ping-Interval header, in
// seconds.
func keepaliveInterval(h string) time.Duration {
	if secs, err := strconv.Atoi(h); err == nil && secs > 0 {
		return time.Duration(secs) * time.Second
	}
	return defaultKeepalive
}

// pollWatcher buffers the events of one watch until a client polls them.
type pollWatcher struct {
	w      *watch
	cancel context.CancelFunc

	mu     sync.Mutex
	events []*pb.FilesystemEvent // guarded by mu; oldest first
}

func (p *pollWatcher) stop() { p.cancel() }

func (p *pollWatcher) add(e *pb.FilesystemEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.events) >= maxPolledEvents {
		p.events = p.events[1:]
	}
	p.events = append(p.events, e)
}

func (p *pollWatcher) drain() []*pb.FilesystemEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.events
	p.events = nil
	return out
}

// CreateWatcher starts a watch whose events are fetched by polling.
func (s *Service) CreateWatcher(_ context.Context, req *connect.Request[pb.CreateWatcherRequest]) (*connect.Response[pb.CreateWatcherResponse], error) {
	u, abs, err := s.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	w, err := s.startWatch(u, abs, watchOptions{
		recursive:    req.Msg.GetRecursive(),
		includeEntry: req.Msg.GetIncludeEntry(),
		allowNetwork: req.Msg.GetAllowNetworkMounts(),
	})
	if err != nil {
		return nil, err
	}
	id := newWatcherID()
	// The watch outlives the request, so it runs on its own context.
	ctx, cancel := context.WithCancel(context.Background())
	p := &pollWatcher{w: w, cancel: cancel}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		w.close()
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("agent is shutting down"))
	}
	s.watchers[id] = p
	s.wg.Go(func() {
		defer w.close()
		if err := w.run(ctx, p.add); err != nil {
			s.log.Warn("polling watcher stopped", "path", abs, "err", err)
		}
	})
	s.mu.Unlock()
	return connect.NewResponse(&pb.CreateWatcherResponse{WatcherId: id}), nil
}

// GetWatcherEvents returns and forgets the events seen since the last poll.
func (s *Service) GetWatcherEvents(_ context.Context, req *connect.Request[pb.GetWatcherEventsRequest]) (*connect.Response[pb.GetWatcherEventsResponse], error) {
	s.mu.Lock()
	p, ok := s.watchers[req.Msg.GetWatcherId()]
	s.mu.Unlock()
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher '%s' not found", req.Msg.GetWatcherId()))
	}
	return connect.NewResponse(&pb.GetWatcherEventsResponse{Events: p.drain()}), nil
}

// RemoveWatcher stops a polling watcher.
func (s *Service) RemoveWatcher(_ context.Context, req *connect.Request[pb.RemoveWatcherRequest]) (*connect.Response[pb.RemoveWatcherResponse], error) {
	s.mu.Lock()
	p, ok := s.watchers[req.Msg.GetWatcherId()]
	delete(s.watchers, req.Msg.GetWatcherId())
	s.mu.Unlock()
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher '%s' not found", req.Msg.GetWatcherId()))
	}
	p.stop()
	return connect.NewResponse(&pb.RemoveWatcherResponse{}), nil
}

func newWatcherID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}
