package filesystem

import (
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	pb "github.com/warrenhq/warren/proto/filesystem"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// names turns uids and gids into names, remembering answers for the life of
// one request: a listing of thousands of files by one owner would otherwise
// parse /etc/passwd thousands of times.
type names struct {
	users  map[uint32]string
	groups map[uint32]string
}

func newNames() *names {
	return &names{users: map[uint32]string{}, groups: map[uint32]string{}}
}

func (n *names) user(uid uint32) string {
	if name, ok := n.users[uid]; ok {
		return name
	}
	id := strconv.FormatUint(uint64(uid), 10)
	name := id
	if u, err := user.LookupId(id); err == nil {
		name = u.Username
	}
	n.users[uid] = name
	return name
}

func (n *names) group(gid uint32) string {
	if name, ok := n.groups[gid]; ok {
		return name
	}
	id := strconv.FormatUint(uint64(gid), 10)
	name := id
	if g, err := user.LookupGroupId(id); err == nil {
		name = g.Name
	}
	n.groups[gid] = name
	return name
}

// entryInfo describes the entry at path without following it; path is
// reported as given. A symlink reports the type and mode of what it finally
// points at, and UNSPECIFIED when that does not exist.
func entryInfo(path string, n *names) (*pb.EntryInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	e := &pb.EntryInfo{
		Name:         filepath.Base(path),
		Type:         fileType(fi.Mode()),
		Path:         path,
		Size:         fi.Size(),
		Mode:         uint32(fi.Mode().Perm()),
		Permissions:  fi.Mode().String(),
		ModifiedTime: timestamppb.New(fi.ModTime()),
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner = n.user(st.Uid)
		e.Group = n.group(st.Gid)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		e.Type = pb.FileType_FILE_TYPE_UNSPECIFIED
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			// Dangling or looping: report where the link points, as far as
			// it can be read, and leave the type unknown.
			if raw, rerr := os.Readlink(path); rerr == nil {
				if !filepath.IsAbs(raw) {
					raw = filepath.Join(filepath.Dir(path), raw)
				}
				e.SymlinkTarget = &raw
			}
		} else {
			abs, err := filepath.Abs(target)
			if err != nil {
				abs = target
			}
			e.SymlinkTarget = &abs
			if tfi, err := os.Stat(abs); err == nil {
				e.Type = fileType(tfi.Mode())
				e.Mode = uint32(tfi.Mode().Perm())
			}
		}
	}
	if md, err := ReadMetadata(path); err == nil && len(md) > 0 {
		e.Metadata = md
	}
	return e, nil
}

// fileType maps a mode to the wire enum; devices, sockets and pipes have no
// wire type and come out UNSPECIFIED (the SDK skips those in listings).
func fileType(m fs.FileMode) pb.FileType {
	switch {
	case m.IsRegular():
		return pb.FileType_FILE_TYPE_FILE
	case m.IsDir():
		return pb.FileType_FILE_TYPE_DIRECTORY
	case m&fs.ModeSymlink != 0:
		return pb.FileType_FILE_TYPE_SYMLINK
	default:
		return pb.FileType_FILE_TYPE_UNSPECIFIED
	}
}
