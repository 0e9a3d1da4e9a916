package api

import (
	"net/http"

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
	writeJSON(w, http.StatusCreated, volumeTokenOut{VolumeID: v.ID, Name: v.Name, Token: s.vol.Token(v)})
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
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getVolume(w http.ResponseWriter, r *http.Request, team string) error {
	v, err := s.vol.Get(r.Context(), team, r.PathValue("volumeID"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, volumeTokenOut{VolumeID: v.ID, Name: v.Name, Token: s.vol.Token(v)})
	return nil
}

func (s *server) deleteVolume(w http.ResponseWriter, r *http.Request, team string) error {
	if err := s.vol.Delete(r.Context(), team, r.PathValue("volumeID")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
