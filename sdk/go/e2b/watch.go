package e2b

import (
	"context"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/sdk/go/internal/envd/filesystem"
)

// FilesystemEventType is what happened to a watched entry.
type FilesystemEventType string

// The types of filesystem events.
const (
	EventCreate FilesystemEventType = "create"
	EventWrite  FilesystemEventType = "write"
	EventRemove FilesystemEventType = "remove"
	EventRename FilesystemEventType = "rename"
	EventChmod  FilesystemEventType = "chmod"
)

// FilesystemEvent is one change under a watched directory.
type FilesystemEvent struct {
	// Name is the entry's path relative to the watched directory (sub/file.txt when
	// recursive).
	Name string
	Type FilesystemEventType
	// Entry describes the entry after create, write and chmod events, when
	// WatchOptions.IncludeEntry was set; nil otherwise.
	Entry *EntryInfo
}

// WatchOptions configures WatchDir.
type WatchOptions struct {
	User string
	// Recursive also watches the subdirectories.
	Recursive bool
	// IncludeEntry adds the entry's description to create, write and chmod events.
	IncludeEntry bool
	// AllowNetworkMounts allows watching a directory on a network filesystem.
	AllowNetworkMounts bool
	// Timeout bounds the watch: 0 means DefaultCommandTimeout, NoTimeout none.
	Timeout time.Duration
}

// WatchHandle is a running watch. Its events arrive on Events, which is closed when the watch
// ends (Stop, its timeout, ctx, or an error, which Err then reports).
type WatchHandle struct {
	events chan FilesystemEvent
	cancel context.CancelFunc
	e      *envdConn

	mu      sync.Mutex // guards err and stopped
	err     error
	stopped bool
}

var eventTypes = map[filesystem.EventType]FilesystemEventType{
	filesystem.EventType_EVENT_TYPE_CREATE: EventCreate,
	filesystem.EventType_EVENT_TYPE_WRITE:  EventWrite,
	filesystem.EventType_EVENT_TYPE_REMOVE: EventRemove,
	filesystem.EventType_EVENT_TYPE_RENAME: EventRename,
	filesystem.EventType_EVENT_TYPE_CHMOD:  EventChmod,
}

// WatchDir watches a directory. It returns once the watch is in place: changes made after it
// returns are reported. A missing directory is a *FileNotFoundError, a path that is not a
// directory a *InvalidArgumentError.
func (f *Filesystem) WatchDir(ctx context.Context, path string, opts WatchOptions) (*WatchHandle, error) {
	sctx, cancel := streamContext(ctx, opts.Timeout)
	req := connect.NewRequest(&filesystem.WatchDirRequest{Path: path, Recursive: opts.Recursive, IncludeEntry: opts.IncludeEntry, AllowNetworkMounts: opts.AllowNetworkMounts})
	f.e.setUser(req.Header(), opts.User)
	req.Header().Set("Keepalive-Ping-Interval", keepalivePingSeconds)
	s, err := f.e.fs.WatchDir(sctx, req)
	if err != nil {
		cancel()
		return nil, f.e.rpcError(err, fileNotFound)
	}
	var timer *time.Timer
	if d := f.e.cfg.RequestTimeout; d > 0 {
		timer = time.AfterFunc(d, cancel)
	}
	ok := s.Receive()
	if timer != nil && !timer.Stop() {
		s.Close()
		return nil, &TimeoutError{sandboxErr(0, "the watch did not start within the request timeout", context.DeadlineExceeded)}
	}
	if !ok || s.Msg().GetStart() == nil {
		err := s.Err()
		s.Close()
		cancel()
		if err == nil {
			return nil, &SandboxError{Message: "Expected start event"}
		}
		return nil, f.e.rpcError(err, fileNotFound)
	}
	w := &WatchHandle{events: make(chan FilesystemEvent, 64), cancel: cancel, e: f.e}
	go w.follow(sctx, s)
	return w, nil
}

func (w *WatchHandle) follow(ctx context.Context, s *connect.ServerStreamForClient[filesystem.WatchDirResponse]) {
	defer close(w.events)
	defer w.cancel()
	defer s.Close()
	for s.Receive() {
		fe := s.Msg().GetFilesystem()
		if fe == nil {
			continue
		}
		ev := FilesystemEvent{Name: fe.GetName(), Type: eventTypes[fe.GetType()]}
		if fe.GetEntry() != nil {
			info, _ := entryInfo(fe.GetEntry())
			ev.Entry = &info
		}
		select {
		case w.events <- ev:
		case <-ctx.Done():
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := s.Err(); err != nil && !w.stopped {
		w.err = w.e.rpcError(err, fileNotFound)
	}
}

// Events delivers the watch's events in order; it is closed when the watch ends.
func (w *WatchHandle) Events() <-chan FilesystemEvent { return w.events }

// Stop ends the watch.
func (w *WatchHandle) Stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.cancel()
}

// Err reports why the watch ended, once Events is closed: nil after Stop, a *TimeoutError at
// its timeout.
func (w *WatchHandle) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
