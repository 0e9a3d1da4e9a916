// Package filesystem implements the agent's Connect filesystem.Filesystem
// service: stat, list, make, move and remove paths, and watch directories,
// all on behalf of the user the request names. It also owns the helpers
// every file-writing part of the agent shares (parent creation chowned to
// the user, e2b metadata xattrs). It does not serve file contents; the
// files package does.
package filesystem

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"syscall"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/agent/state"
	"github.com/warrenhq/warren/internal/agent/users"
	"github.com/warrenhq/warren/proto/filesystem/filesystemconnect"
)

// Service implements filesystemconnect.FilesystemHandler.
type Service struct {
	st  *state.State
	log *slog.Logger

	mu       sync.Mutex
	watchers map[string]*pollWatcher // guarded by mu; polling watchers by id
	closed   bool                    // guarded by mu; set by Close
	wg       sync.WaitGroup          // polling watcher goroutines
}

var _ filesystemconnect.FilesystemHandler = (*Service)(nil)

// New returns a filesystem service reading the default user and workdir
// from st.
func New(st *state.State, log *slog.Logger) *Service {
	return &Service{st: st, log: log, watchers: map[string]*pollWatcher{}}
}

// Close stops every polling watcher and waits for them. Streaming watches
// end with their requests.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	ws := s.watchers
	s.watchers = map[string]*pollWatcher{}
	s.mu.Unlock()
	for _, w := range ws {
		w.stop()
	}
	s.wg.Wait()
}

// user resolves the account an RPC acts for: the Basic auth username, or
// the sandbox's default user.
func (s *Service) user(h http.Header) (*users.User, error) {
	u, err := users.ForRequest(h, s.st.DefaultUser())
	if err != nil {
		return nil, connect.NewError(connect.CodeUnauthenticated, err)
	}
	return u, nil
}

// resolve returns the user of the request and p as an absolute path for
// them.
func (s *Service) resolve(h http.Header, p string) (*users.User, string, error) {
	u, err := s.user(h)
	if err != nil {
		return nil, "", err
	}
	abs, err := u.ResolvePath(p, s.st.DefaultWorkdir())
	if err != nil {
		return nil, "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("invalid path '%s': %w", p, err))
	}
	return u, abs, nil
}

// fsError maps a failed filesystem call on path to a Connect error. The
// message names the path the way the user sent it resolved, never more.
func (s *Service) fsError(op, path string, err error) error {
	var code connect.Code
	var unmovable *unmovableError
	switch {
	case errors.As(err, &unmovable):
		return connect.NewError(connect.CodeInvalidArgument, unmovable)
	case errors.Is(err, fs.ErrNotExist):
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("path '%s' does not exist", path))
	case errors.Is(err, fs.ErrPermission):
		code = connect.CodePermissionDenied
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.EINVAL),
		errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.EXDEV):
		code = connect.CodeInvalidArgument
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		code = connect.CodeResourceExhausted
	default:
		s.log.Error("filesystem operation failed", "op", op, "path", path, "err", err)
		return connect.NewError(connect.CodeInternal, fmt.Errorf("%s '%s' failed", op, path))
	}
	return connect.NewError(code, fmt.Errorf("%s '%s': %w", op, path, errnoOf(err)))
}

// errnoOf strips the *PathError or *LinkError wrapper so a message shows the path once.
func errnoOf(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
