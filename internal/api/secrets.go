package api

import (
	"net/http"
	"time"

	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/secrets"
)

// secretJSON is E2B's Secret: metadata only, never the value.
type secretJSON struct {
	SecretID       string            `json:"secretID"`
	Name           string            `json:"name"`
	CurrentVersion int64             `json:"currentVersion"`
	Metadata       map[string]string `json:"metadata"`
	CreatedAt      time.Time         `json:"createdAt"`
	UpdatedAt      time.Time         `json:"updatedAt"`
}

func secretOut(sec sandbox.Secret) secretJSON {
	md := sec.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return secretJSON{SecretID: sec.ID, Name: sec.Name, CurrentVersion: sec.Version, Metadata: md,
		CreatedAt: sec.CreatedAt.UTC(), UpdatedAt: sec.UpdatedAt.UTC()}
}

func (s *server) registerSecrets(mux *http.ServeMux) {
	if s.secrets == nil {
		return
	}
	mux.Handle("GET /secrets", s.wrap(s.listSecrets))
	mux.Handle("POST /secrets", s.wrap(s.createSecret))
	mux.Handle("GET /secrets/{secretID}", s.wrap(s.getSecret))
	mux.Handle("POST /secrets/{secretID}", s.wrap(s.updateSecret))
	mux.Handle("DELETE /secrets/{secretID}", s.wrap(s.deleteSecret))
}

func (s *server) createSecret(w http.ResponseWriter, r *http.Request, team string) error {
	var req struct {
		Name     *string           `json:"name"`
		Value    *string           `json:"value"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := decodeRequired(r, &req, `{"name": "openai-key", "value": "sk-..."}`); err != nil {
		return err
	}
	if req.Name == nil || req.Value == nil {
		return sandbox.Errorf(sandbox.KindInvalid, "name and value are required")
	}
	sec, err := s.secrets.Create(r.Context(), team, *req.Name, *req.Value, req.Metadata)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusCreated, secretOut(sec))
	return nil
}

func (s *server) updateSecret(w http.ResponseWriter, r *http.Request, team string) error {
	var req struct {
		Value    *string           `json:"value"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := decodeRequired(r, &req, `{"value": "sk-..."}`); err != nil {
		return err
	}
	if req.Value == nil {
		return sandbox.Errorf(sandbox.KindInvalid, "value is required")
	}
	sec, err := s.secrets.Update(r.Context(), team, r.PathValue("secretID"), *req.Value, req.Metadata)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusOK, secretOut(sec))
	return nil
}

func (s *server) getSecret(w http.ResponseWriter, r *http.Request, team string) error {
	sec, err := s.secrets.Get(r.Context(), team, r.PathValue("secretID"))
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusOK, secretOut(sec))
	return nil
}

// listSecrets pages the team's secrets by name; the next token is the
// name of the last secret returned.
func (s *server) listSecrets(w http.ResponseWriter, r *http.Request, team string) error {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), secrets.MaxListLimit, 1, secrets.MaxListLimit, "limit")
	if err != nil {
		return err
	}
	list, next, err := s.secrets.List(r.Context(), team, q.Get("nextToken"), limit)
	if err != nil {
		return err
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	out := make([]secretJSON, 0, len(list))
	for _, sec := range list {
		out = append(out, secretOut(sec))
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) deleteSecret(w http.ResponseWriter, r *http.Request, team string) error {
	if err := s.secrets.Delete(r.Context(), team, r.PathValue("secretID")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
