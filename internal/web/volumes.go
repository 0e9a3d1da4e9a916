package web

import (
	"context"
	"net/http"
	"time"

	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/volume"
)

func (s *server) volumeRoutes(mux *http.ServeMux) {
	mux.Handle("GET /dashboard/api/volumes", s.authed(s.listVolumes))
	mux.Handle("POST /dashboard/api/volumes", s.authed(s.createVolume))
	mux.Handle("DELETE /dashboard/api/volumes/{id}", s.authed(s.deleteVolume))
}

// volumeJSON is a volume as the volumes view shows it: E2B's shapes have
// no room for its usage, which only the dashboard reports.
type volumeJSON struct {
	ID        string    `json:"volumeId"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	UsedBytes int64     `json:"usedBytes"`
	// LimitBytes is its size limit; 0 = none.
	LimitBytes int64                 `json:"limitBytes"`
	MountedBy  []lifecycle.VolumeUse `json:"mountedBy"`
}

func (s *server) volumes() (*volume.Service, error) {
	if s.cfg.Volumes == nil {
		return nil, sandbox.Errorf(sandbox.KindUnavailable, "this server has no volumes")
	}
	return s.cfg.Volumes, nil
}

func (s *server) volumeOut(ctx context.Context, vols *volume.Service, v sandbox.Volume, uses map[string][]lifecycle.VolumeUse) (volumeJSON, error) {
	u, err := vols.Usage(ctx, v.ID)
	if err != nil {
		return volumeJSON{}, err
	}
	by := uses[v.ID]
	if by == nil {
		by = []lifecycle.VolumeUse{}
	}
	return volumeJSON{ID: v.ID, Name: v.Name, CreatedAt: v.CreatedAt, UsedBytes: u.UsedBytes, LimitBytes: u.LimitBytes, MountedBy: by}, nil
}

func (s *server) listVolumes(w http.ResponseWriter, r *http.Request, team string) error {
	vols, err := s.volumes()
	if err != nil {
		return err
	}
	vs, err := vols.List(r.Context(), team)
	if err != nil {
		return err
	}
	uses, err := s.m.VolumeUses(r.Context(), team)
	if err != nil {
		return err
	}
	out := make([]volumeJSON, 0, len(vs))
	for _, v := range vs {
		j, err := s.volumeOut(r.Context(), vols, v, uses)
		if err != nil {
			return err
		}
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) createVolume(w http.ResponseWriter, r *http.Request, team string) error {
	vols, err := s.volumes()
	if err != nil {
		return err
	}
	var body struct {
		Name string `json:"name"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	v, err := vols.Create(r.Context(), team, body.Name)
	if err != nil {
		return err
	}
	j, err := s.volumeOut(r.Context(), vols, v, nil)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, j)
	return nil
}

// deleteVolume refuses, as the control plane does, while a running or
// paused sandbox mounts the volume.
func (s *server) deleteVolume(w http.ResponseWriter, r *http.Request, team string) error {
	vols, err := s.volumes()
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := s.m.VolumeUnused(r.Context(), team, id); err != nil {
		return err
	}
	if err := vols.Delete(r.Context(), team, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
