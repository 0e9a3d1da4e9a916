package template

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
)

// A COPY step, as E2B runs it: the SDK uploads an archive of what the
// source pattern matches on the client (a matched directory with all it
// holds), and the server copies the part of the archive named by the
// pattern's static prefix, the path up to its first glob character:
//
//   - a directory (a glob's prefix always is one): its contents are merged
//     into the destination directory, links kept as links;
//   - a regular file: to the destination, or into it when the destination
//     ends in '/' or is an existing directory;
//   - a link: the link itself, named as the destination, or under its own
//     name into a destination ending in '/'.
//
// The owner (the step's user, else the template's user; "name" means
// "name:name") owns what is copied, and the mode applies to the file, or
// to everything under the directory but links and the destination itself.
// Here the context holds each step's files with their modes set, and each
// step becomes one Dockerfile COPY of a directory (which the engine copies
// with its links as they are) or of a file. Unlike E2B, where directories
// a copy creates on the way are root's, the engine gives them to the owner.

// copySource is a COPY step as prepared in the build context.
type copySource struct {
	// From is what the engine copies, relative to the context: a file, or
	// a directory whose contents it merges into To.
	From string
	To   string
	// Modes are Unix modes (as in a tar header) the context's entries get:
	// a key naming a file is that file's, a key ending in '/' is for
	// everything under it.
	Modes map[string]int64
}

// prepareCopy extracts a COPY step's upload into the context directory
// s<i> and sets out what the engine copies where.
func (r *Registry) prepareCopy(team, dir string, i int, c copyStep) (copySource, error) {
	sub := fmt.Sprintf("s%d", i+1)
	dest := filepath.Join(dir, sub)
	if err := os.Mkdir(dest, 0o700); err != nil {
		return copySource{}, err
	}
	f, err := r.uploads.open(team, c.filesHash)
	if err != nil {
		return copySource{}, err
	}
	defer f.Close()
	if err := Extract(f, dest); err != nil {
		return copySource{}, err
	}
	src, err := cleanRel(staticPrefix(c.src))
	if err != nil {
		return copySource{}, sandbox.Errorf(sandbox.KindInvalid, "invalid source '%s': %v", c.src, err)
	}
	from := path.Join(sub, src)
	to := c.dest
	// Through an os.Root, and no link on the way: the links of the upload
	// point into the image, never at the host's files.
	root, err := os.OpenRoot(dest)
	if err != nil {
		return copySource{}, err
	}
	defer root.Close()
	if under, err := underLink(root, src); err != nil || under {
		return copySource{}, sandbox.Errorf(sandbox.KindInvalid, "source path goes through a symbolic link or does not exist: %s", c.src)
	}
	fi, err := root.Lstat(src)
	if err != nil {
		return copySource{}, sandbox.Errorf(sandbox.KindInvalid, "source path does not exist: %s", c.src)
	}
	cs := copySource{From: from, To: to, Modes: map[string]int64{}}
	switch {
	case fi.IsDir():
		if c.hasMode {
			cs.Modes[from+"/"] = c.mode
		}
	case fi.Mode().IsRegular():
		if c.hasMode {
			cs.Modes[from] = c.mode
		}
	case fi.Mode()&fs.ModeSymlink != 0:
		// The engine follows a link it is told to copy, and copies the
		// links inside a directory as they are: so the link goes into a
		// directory of its own, under the name it gets in the image.
		target, err := root.Readlink(src)
		if err != nil {
			return copySource{}, err
		}
		into, name := linkDest(to, path.Base(src))
		stage := fmt.Sprintf("l%d", i+1)
		if err := os.Mkdir(filepath.Join(dir, stage), 0o755); err != nil {
			return copySource{}, err
		}
		if err := os.Symlink(target, filepath.Join(dir, stage, name)); err != nil {
			return copySource{}, err
		}
		cs.From, cs.To = stage, into
	default:
		return copySource{}, sandbox.Errorf(sandbox.KindInvalid, "source path is not a file, directory or link: %s", c.src)
	}
	return cs, nil
}

// staticPrefix is the part of a source pattern before its first glob
// character (*, ?, [ or {), cut at a '/', as E2B's server finds it: a
// pattern's matches are under that directory in the upload. A path with
// no glob is itself.
func staticPrefix(src string) string {
	p := src + "/"
	cut := -1
loop:
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '/':
			cut = i
		case '*', '?', '[', '{':
			break loop
		}
	}
	if cut <= 0 {
		return "."
	}
	return path.Clean(p[:cut])
}

// linkDest is where a link named name goes for a COPY to dest: the
// directory the engine copies into, and the link's name there.
func linkDest(dest, name string) (into, linkName string) {
	base := path.Base(dest)
	if strings.HasSuffix(dest, "/") || base == "." || base == ".." || base == "/" {
		return strings.TrimSuffix(dest, "/") + "/", name
	}
	return path.Dir(dest) + "/", base
}

// contextMode is the mode the context gives the entry at name (slash
// separated, relative to the context), if a COPY step sets one. Links keep
// theirs.
func contextMode(modes map[string]int64, name string, isLink bool) (int64, bool) {
	if isLink || len(modes) == 0 {
		return 0, false
	}
	if m, ok := modes[name]; ok {
		return m, true
	}
	for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
		if m, ok := modes[d+"/"]; ok {
			return m, true
		}
	}
	return 0, false
}
