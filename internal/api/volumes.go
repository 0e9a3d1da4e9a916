package api

import (
	"context"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/sandbox"
)

// volumeOut is E2B's Volume; volumeTokenOut its VolumeAndToken, whose
// domain Warren leaves out so that the SDK uses E2B_VOLUME_API_URL.
type volumeOut struct {
	VolumeID string `json:"volumeID"`
	Name     string `json:"name"`
}

type volumeTokenOut struct {
	VolumeID string `json:"volumeID"`
	Name     string `json:"name"`
	Token    string `json:"token"`
}

func (s *server) registerVolumes(mux *http.ServeMux) {
	if s.vol == nil {
		return
	}
	mux.Handle("POST /volumes", s.wrap(s.createVolume))
	mux.Handle("GET /volumes", s.wrap(s.listVolumes))
	mux.Handle("GET /volumes/{volumeID}", s.wrap(s.getVolume))
	mux.Handle("DELETE /volumes/{volumeID}", s.wrap(s.deleteVolume))
}

func (s *server) createVolume(w http.ResponseWriter, r *http.Request, team string) error {
	var req struct {
		Name *string `json:"name"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Name == nil {
		return sandbox.Errorf(sandbox.KindInvalid, "name is required")
	}
	v, err := s.vol.Create(r.Context(), team, *req.Name)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusCreated, volumeTokenOut{VolumeID: v.ID, Name: v.Name, Token: s.vol.Token(v)})
	return nil
}

func (s *server) listVolumes(w http.ResponseWriter, r *http.Request, team string) error {
	vs, err := s.vol.List(r.Context(), team)
	if err != nil {
		return err
	}
	out := make([]volumeOut, 0, len(vs))
	for _, v := range vs {
		out = append(out, volumeOut{VolumeID: v.ID, Name: v.Name})
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getVolume(w http.ResponseWriter, r *http.Request, team string) error {
	v, err := s.vol.Get(r.Context(), team, r.PathValue("volumeID"))
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusOK, volumeTokenOut{VolumeID: v.ID, Name: v.Name, Token: s.vol.Token(v)})
	return nil
}

// deleteVolume refuses while a sandbox that is running or paused mounts
// the volume (lifecycle.Manager.VolumeUnused).
func (s *server) deleteVolume(w http.ResponseWriter, r *http.Request, team string) error {
	if err := s.m.VolumeUnused(r.Context(), team, r.PathValue("volumeID")); err != nil {
		return err
	}
	if err := s.vol.Delete(r.Context(), team, r.PathValue("volumeID")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// systemDirs are where a volume may not be mounted: the kernel's and the
// engine's own, and Warren's agent.
var systemDirs = []string{"/proc", "/sys", "/dev", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/usr", "/boot", "/run", "/var/run", "/.warren", "/opt/warren"}

// volumeMounts resolves a create's volumeMounts to the team's volumes.
func (s *server) volumeMounts(ctx context.Context, team string, in []volumeMountJSON) ([]sandbox.VolumeMount, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if s.vol == nil {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "volumes are not enabled on this server")
	}
	if len(in) > 16 {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "at most 16 volume mounts")
	}
	vols, err := s.vol.List(ctx, team)
	if err != nil {
		return nil, err
	}
	var out []sandbox.VolumeMount
	seen := map[string]bool{}
	for _, m := range in {
		p, err := mountPath(m.Path)
		if err != nil {
			return nil, err
		}
		if seen[p] {
			return nil, sandbox.Errorf(sandbox.KindInvalid, "volume mount path %q is given twice", p)
		}
		seen[p] = true
		i := slices.IndexFunc(vols, func(v sandbox.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			return nil, sandbox.Errorf(sandbox.KindInvalid, "volume '%s' not found", m.Name)
		}
		out = append(out, sandbox.VolumeMount{Name: m.Name, VolumeID: vols[i].ID, Path: p, Source: s.vol.Source(vols[i].ID)})
	}
	for _, a := range out {
		for _, b := range out {
			if a.Path != b.Path && strings.HasPrefix(b.Path, a.Path+"/") {
				return nil, sandbox.Errorf(sandbox.KindInvalid, "volume mount paths %q and %q overlap", a.Path, b.Path)
			}
		}
	}
	return out, nil
}

// mountPath checks a mount path: absolute, clean, not / nor a system
// directory or under one.
func mountPath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p || strings.ContainsAny(p, "\x00:,") {
		return "", sandbox.Errorf(sandbox.KindInvalid, "invalid volume mount path %q: must be an absolute, clean path", p)
	}
	if p == "/" {
		return "", sandbox.Errorf(sandbox.KindInvalid, "a volume cannot be mounted at /")
	}
	for _, d := range systemDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return "", sandbox.Errorf(sandbox.KindInvalid, "a volume cannot be mounted at %q (under the system directory %s)", p, d)
		}
	}
	return p, nil
}

func volumeMountsOut(ms []sandbox.VolumeMount) []volumeMountJSON {
	out := make([]volumeMountJSON, 0, len(ms))
	for _, m := range ms {
		out = append(out, volumeMountJSON{Name: m.Name, Path: m.Path})
	}
	return out
}
