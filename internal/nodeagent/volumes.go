package nodeagent

import (
	"net/http"
	"os"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/volume"
)

// VolumesPrefix is where the node agent serves its node's volumes'
// content: VolumesPrefix+"{name}/path", "/dir", "/file" (volume's
// ContentHandler) and "/usage", name being a volume's directory under
// ServeVolumes' dir.
const VolumesPrefix = "/v1/volumes/"

// SharedVolumesPrefix is where it serves, the same way, the volumes under
// ServeSharedVolumes' dir: ReadWriteMany volumes, directories of a
// distributed filesystem that every node mounts, which any node's agent
// serves.
const SharedVolumesPrefix = "/v1/shared-volumes/"

// ServeVolumes serves the content of the volumes under dir (the
// directories the local-path provisioner makes on this node, one per
// PersistentVolume), as the control plane forwards its content API to the
// node that holds a volume. Each is opened through an os.Root, so the
// path safety is the content API's own.
func (s *Server) ServeVolumes(dir string) { s.serveVolumes(VolumesPrefix, dir) }

// ServeSharedVolumes serves the content of the ReadWriteMany volumes
// under dir (this node's mount of the shared filesystem, where the
// local-path provisioner makes them) at SharedVolumesPrefix.
func (s *Server) ServeSharedVolumes(dir string) { s.serveVolumes(SharedVolumesPrefix, dir) }

func (s *Server) serveVolumes(prefix, dir string) {
	open := func(r *http.Request) (*os.Root, error) { return openVolume(dir, r.PathValue("volumeID")) }
	content := volume.ContentHandler(prefix, open)
	s.mux.HandleFunc(prefix, func(w http.ResponseWriter, r *http.Request) {
		if !s.tokenOK(r) {
			writeError(w, errBadToken)
			return
		}
		content.ServeHTTP(w, r)
	})
	s.mux.HandleFunc("GET "+prefix+"{volumeID}/usage", s.authed(func(_ http.ResponseWriter, r *http.Request) (any, error) {
		root, err := open(r)
		if err != nil {
			return nil, err
		}
		defer root.Close()
		n, err := volume.FilesBytes(root)
		return map[string]int64{"usedBytes": n}, err
	}))
}

// openVolume opens the volume name under dir; name is one path element.
func openVolume(dir, name string) (*os.Root, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "%q is not a volume's directory", name)
	}
	parent, err := os.OpenRoot(dir)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindUnavailable, err, "this node agent has no volumes directory")
	}
	defer parent.Close()
	root, err := parent.OpenRoot(name)
	if os.IsNotExist(err) {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "no volume %s on this node", name)
	}
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "cannot open volume "+name)
	}
	return root, nil
}
