package filesystem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/agent/users"
	pb "github.com/warrenhq/warren/proto/filesystem"
)

// Every RPC does its filesystem work inside users.User.Do, with the
// requesting user's identity: the kernel then refuses what that user may
// not do, on every path component and through symlinks, with no window
// between a check and a use.

// Stat describes one path without following a final symlink.
func (s *Service) Stat(_ context.Context, req *connect.Request[pb.StatRequest]) (*connect.Response[pb.StatResponse], error) {
	u, abs, err := s.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	var e *pb.EntryInfo
	err = u.Do(func() (err error) {
		if e, err = entryInfo(abs, newNames()); err != nil {
			return s.fsError("stat", abs, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.StatResponse{Entry: e}), nil
}

// MakeDir creates a directory and its parents, owned by the user.
func (s *Service) MakeDir(_ context.Context, req *connect.Request[pb.MakeDirRequest]) (*connect.Response[pb.MakeDirResponse], error) {
	u, abs, err := s.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	var e *pb.EntryInfo
	if err := u.Do(func() (err error) { e, err = s.makeDir(u, abs); return err }); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.MakeDirResponse{Entry: e}), nil
}

// makeDir is MakeDir's work, done as u.
func (s *Service) makeDir(u *users.User, abs string) (*pb.EntryInfo, error) {
	if fi, err := os.Stat(abs); err == nil {
		if fi.IsDir() {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory '%s' already exists", abs))
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path '%s' already exists and is not a directory", abs))
	}
	if _, err := MkdirAllAs(abs, u.UID, u.GID); err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("a parent of '%s' is not a directory", abs))
		}
		return nil, s.fsError("make directory", abs, err)
	}
	e, err := entryInfo(abs, newNames())
	if err != nil {
		return nil, s.fsError("stat", abs, err)
	}
	return e, nil
}

// Move renames source to destination, creating the destination's parents.
// Across filesystems it copies and then removes the source, like mv.
func (s *Service) Move(ctx context.Context, req *connect.Request[pb.MoveRequest]) (*connect.Response[pb.MoveResponse], error) {
	u, src, err := s.resolve(req.Header(), req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	dst, err := u.ResolvePath(req.Msg.GetDestination(), s.st.DefaultWorkdir())
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("invalid path '%s': %w", req.Msg.GetDestination(), err))
	}
	var e *pb.EntryInfo
	if err := u.Do(func() (err error) { e, err = s.move(ctx, u, src, dst); return err }); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.MoveResponse{Entry: e}), nil
}

// move is Move's work, done as u.
func (s *Service) move(ctx context.Context, u *users.User, src, dst string) (*pb.EntryInfo, error) {
	if _, err := os.Lstat(src); err != nil {
		return nil, s.fsError("move", src, err)
	}
	if _, err := MkdirAllAs(filepath.Dir(dst), u.UID, u.GID); err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("a parent of '%s' is not a directory", dst))
		}
		return nil, s.fsError("move", dst, err)
	}
	if err := move(ctx, src, dst); err != nil {
		if ctx.Err() != nil {
			return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
		}
		return nil, s.fsError("move", src, err)
	}
	e, err := entryInfo(dst, newNames())
	if err != nil {
		return nil, s.fsError("stat", dst, err)
	}
	return e, nil
}

// Remove deletes a path and everything below it; a missing path is fine.
func (s *Service) Remove(_ context.Context, req *connect.Request[pb.RemoveRequest]) (*connect.Response[pb.RemoveResponse], error) {
	u, abs, err := s.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	err = u.Do(func() error {
		if err := os.RemoveAll(abs); err != nil {
			return s.fsError("remove", abs, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.RemoveResponse{}), nil
}

// ListDir lists a directory up to depth levels (0 counts as 1), depth
// first in lexical order. A symlinked directory is followed; entries are
// reported under the requested path, not the link's target.
func (s *Service) ListDir(ctx context.Context, req *connect.Request[pb.ListDirRequest]) (*connect.Response[pb.ListDirResponse], error) {
	u, abs, err := s.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	var entries []*pb.EntryInfo
	err = u.Do(func() (err error) {
		entries, err = s.listDir(ctx, abs, int(max(req.Msg.GetDepth(), 1)))
		return err
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.ListDirResponse{Entries: entries}), nil
}

// listDir is ListDir's work, done as the requesting user.
func (s *Service) listDir(ctx context.Context, abs string, depth int) ([]*pb.EntryInfo, error) {
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, s.fsError("list", abs, err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path '%s' is not a directory", abs))
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, s.fsError("list", abs, err)
	}
	n := newNames()
	var entries []*pb.EntryInfo
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if p == root {
			return err // an unreadable root fails the call
		}
		if err != nil {
			// An unreadable subdirectory is listed but not descended into.
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		e, statErr := entryInfo(filepath.Join(abs, rel), n)
		if statErr == nil {
			entries = append(entries, e)
		}
		if d.IsDir() && strings.Count(rel, string(filepath.Separator))+1 >= depth {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
		}
		return nil, s.fsError("list", abs, err)
	}
	return entries, nil
}
