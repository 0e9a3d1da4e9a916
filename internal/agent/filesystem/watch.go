package filesystem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"connectrpc.com/connect"
	"github.com/fsnotify/fsnotify"

	"github.com/warrenhq/warren/internal/agent/users"

	pb "github.com/warrenhq/warren/proto/filesystem"
)

// watchOptions are the knobs shared by WatchDir and CreateWatcher.
type watchOptions struct {
	recursive    bool
	includeEntry bool
	allowNetwork bool
}

// watch turns fsnotify events under one directory into wire events. With
// recursive set it watches every subdirectory, including those created
// while it runs.
type watch struct {
	root string
	as   *users.User // whose identity reads the tree (users.User.Do)
	opts watchOptions
	fsw  *fsnotify.Watcher
	log  *slog.Logger

	// reported holds paths announced as created while catching up on a new
	// directory; inotify may announce them again, and the repeat is dropped.
	// Only run's goroutine touches it.
	reported map[string]struct{}
}

// maxReported bounds reported; entries whose repeat never comes would
// otherwise pile up over a long watch.
const maxReported = 10_000

// startWatch checks root the way the SDK expects (missing ⇒ not found,
// file ⇒ invalid argument, network mount ⇒ failed precondition unless
// allowed) and starts watching it as u: u must be able to list it, and
// subdirectories u cannot enter are not watched. The caller must close
// the watch.
func (s *Service) startWatch(u *users.User, root string, opts watchOptions) (*watch, error) {
	var w *watch
	err := u.Do(func() (err error) { w, err = s.startWatchAs(u, root, opts); return err })
	return w, err
}

// startWatchAs is startWatch's work, done as u.
func (s *Service) startWatchAs(u *users.User, root string, opts watchOptions) (*watch, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, s.fsError("watch", root, err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path '%s' is not a directory", root))
	}
	// Watching shows the names inside: the user must be able to list the
	// directory. Linux's inotify checks that itself; gVisor's does not.
	d, err := os.Open(root)
	if err != nil {
		return nil, s.fsError("watch", root, err)
	}
	d.Close()
	if !opts.allowNetwork {
		fsType, network, err := networkFilesystem(root)
		if err != nil {
			return nil, s.fsError("watch", root, err)
		}
		if network {
			return nil, connect.NewError(connect.CodeFailedPrecondition,
				fmt.Errorf("path '%s' is on a network filesystem (%s); set allowNetworkMounts to watch it", root, fsType))
		}
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, s.fsError("watch", root, err)
	}
	w := &watch{root: root, as: u, opts: opts, fsw: fsw, log: s.log, reported: map[string]struct{}{}}
	if opts.recursive {
		err = w.addTree(root, nil)
	} else {
		err = fsw.Add(root)
	}
	if err != nil {
		fsw.Close()
		return nil, s.fsError("watch", root, err)
	}
	return w, nil
}

func (w *watch) close() { w.fsw.Close() }

// run delivers events to emit until ctx ends or the watcher fails.
func (w *watch) run(ctx context.Context, emit func(*pb.FilesystemEvent)) error {
	n := newNames()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return nil
			}
			// A queue overflow loses events but the watch stays usable.
			w.log.Warn("watch error", "path", w.root, "err", err)
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return nil
			}
			if w.repeated(ev) {
				continue
			}
			// As the user: the entry's details and the directories newly
			// watched are what the user may see.
			_ = w.as.Do(func() error {
				for _, e := range w.translate(ev, n) {
					emit(e)
				}
				if w.opts.recursive && ev.Has(fsnotify.Create) {
					w.followNewDir(ev.Name, n, emit)
				}
				return nil
			})
		}
	}
}

// wireOps lists the op bits in the order their events are sent.
var wireOps = []struct {
	op fsnotify.Op
	t  pb.EventType
}{
	{fsnotify.Create, pb.EventType_EVENT_TYPE_CREATE},
	{fsnotify.Write, pb.EventType_EVENT_TYPE_WRITE},
	{fsnotify.Remove, pb.EventType_EVENT_TYPE_REMOVE},
	{fsnotify.Rename, pb.EventType_EVENT_TYPE_RENAME},
	{fsnotify.Chmod, pb.EventType_EVENT_TYPE_CHMOD},
}

// translate makes one wire event per op bit, named relative to the root.
func (w *watch) translate(ev fsnotify.Event, n *names) []*pb.FilesystemEvent {
	rel, err := filepath.Rel(w.root, ev.Name)
	if err != nil || rel == "." {
		return nil // the root itself; the SDK has no name for it
	}
	var out []*pb.FilesystemEvent
	for _, o := range wireOps {
		if !ev.Has(o.op) {
			continue
		}
		e := &pb.FilesystemEvent{Name: rel, Type: o.t}
		if w.opts.includeEntry && o.t != pb.EventType_EVENT_TYPE_REMOVE && o.t != pb.EventType_EVENT_TYPE_RENAME {
			if info, err := entryInfo(ev.Name, n); err == nil {
				e.Entry = info
			}
		}
		out = append(out, e)
	}
	return out
}

// followNewDir starts watching a directory created under a recursive watch.
// Whatever appeared in it before the watch took hold would never produce
// an event, so it is reported as created.
func (w *watch) followNewDir(path string, n *names, emit func(*pb.FilesystemEvent)) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.IsDir() {
		return
	}
	err = w.addTree(path, func(p string) {
		if len(w.reported) >= maxReported {
			clear(w.reported)
		}
		w.reported[p] = struct{}{}
		for _, e := range w.translate(fsnotify.Event{Name: p, Op: fsnotify.Create}, n) {
			emit(e)
		}
	})
	if err != nil {
		w.log.Warn("watch new directory", "path", path, "err", err)
	}
}

// repeated reports whether ev only repeats a create already reported by
// followNewDir; any other event on the path ends the deduplication.
func (w *watch) repeated(ev fsnotify.Event) bool {
	if _, ok := w.reported[ev.Name]; !ok {
		return false
	}
	delete(w.reported, ev.Name)
	return ev.Op == fsnotify.Create
}

// addTree watches dir and every directory below it, calling found (when
// set) for each entry below dir.
func (w *watch) addTree(dir string, found func(string)) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // vanished or unreadable: nothing to watch there
		}
		if p != dir && found != nil {
			found(p)
		}
		if !d.IsDir() {
			return nil
		}
		if err := w.fsw.Add(p); err != nil && p == dir {
			return err
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.log.Warn("watch directory", "path", p, "err", err)
		}
		return nil
	})
}
