package api

import (
	"net/http"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/sandbox"
)

// E2B's team API keys: a team lists, makes, renames and revokes its own
// keys, with any of its keys (X-API-Key, or as E2B's clients send an
// access token: Authorization: Bearer). Another team's key is not found.
// E2B's access tokens are deprecated there (a create answers 410): here
// too, an API key does what they did.

func (s *server) registerAPIKeys(mux *http.ServeMux) {
	mux.Handle("GET /api-keys", s.wrap(s.listAPIKeys))
	mux.Handle("POST /api-keys", s.wrap(s.createAPIKey))
	mux.Handle("PATCH /api-keys/{apiKeyID}", s.wrap(s.renameAPIKey))
	mux.Handle("DELETE /api-keys/{apiKeyID}", s.wrap(s.deleteAPIKey))
	mux.Handle("POST /access-tokens", s.wrap(func(w http.ResponseWriter, _ *http.Request, _ string) error {
		httpedge.WriteJSON(w, http.StatusGone, httpedge.Body{Code: http.StatusGone,
			Message: "access tokens are deprecated: use an API key (E2B_API_KEY) for every request"})
		return nil
	}))
	mux.Handle("DELETE /access-tokens/{accessTokenID}", s.wrap(func(_ http.ResponseWriter, r *http.Request, _ string) error {
		return sandbox.Errorf(sandbox.KindNotFound, "access token '%s' not found", r.PathValue("accessTokenID"))
	}))
}

// maxKeyName bounds a key's name, as the dashboard does.
const maxKeyName = 100

// maskJSON is E2B's IdentifierMaskingDetails.
type maskJSON struct {
	Prefix            string `json:"prefix"`
	ValueLength       int    `json:"valueLength"`
	MaskedValuePrefix string `json:"maskedValuePrefix"`
	MaskedValueSuffix string `json:"maskedValueSuffix"`
}

// teamAPIKeyJSON is E2B's TeamAPIKey, and with Key its CreatedTeamAPIKey.
type teamAPIKeyJSON struct {
	ID        string    `json:"id"`
	Key       string    `json:"key,omitempty"`
	Name      string    `json:"name"`
	Mask      maskJSON  `json:"mask"`
	CreatedAt time.Time `json:"createdAt"`
	CreatedBy *struct{} `json:"createdBy"`
	LastUsed  *string   `json:"lastUsed"`
}

// apiKeyHexLength is how many hex digits follow "e2b_" in the keys
// Warren makes (sandbox.NewAPIKey).
var apiKeyHexLength = len(strings.TrimPrefix(sandbox.NewAPIKey(), "e2b_"))

func teamAPIKeyOf(k sandbox.APIKey) teamAPIKeyJSON {
	head, tail, _ := strings.Cut(k.Mask, "…")
	return teamAPIKeyJSON{ID: k.ID, Name: k.Name, CreatedAt: k.CreatedAt.UTC(), Mask: maskJSON{
		Prefix: "e2b_", ValueLength: apiKeyHexLength, MaskedValuePrefix: strings.TrimPrefix(head, "e2b_"), MaskedValueSuffix: tail}}
}

func (s *server) listAPIKeys(w http.ResponseWriter, r *http.Request, team string) error {
	keys, err := s.keys.ListTeamAPIKeys(r.Context(), team)
	if err != nil {
		return err
	}
	out := make([]teamAPIKeyJSON, 0, len(keys))
	for _, k := range keys {
		out = append(out, teamAPIKeyOf(k))
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

type apiKeyNameJSON struct {
	Name string `json:"name"`
}

// keyName reads the {name} body of a create or a rename.
func (s *server) keyName(r *http.Request) (string, error) {
	var body apiKeyNameJSON
	if err := decodeRequired(r, &body, `{"name": "ci"}`); err != nil {
		return "", err
	}
	if body.Name == "" || len(body.Name) > maxKeyName {
		return "", sandbox.Errorf(sandbox.KindInvalid, "name must have 1 to %d bytes", maxKeyName)
	}
	return body.Name, nil
}

func (s *server) createAPIKey(w http.ResponseWriter, r *http.Request, team string) error {
	name, err := s.keyName(r)
	if err != nil {
		return err
	}
	key, k := sandbox.MakeAPIKey(team, name, time.Now())
	if err := s.keys.CreateAPIKey(r.Context(), k); err != nil {
		return err
	}
	out := teamAPIKeyOf(k)
	out.Key = key
	httpedge.WriteJSON(w, http.StatusCreated, out)
	return nil
}

// teamKey returns the {apiKeyID} of the request when it is one of team's.
func (s *server) teamKey(r *http.Request, team string) (sandbox.APIKey, error) {
	id := r.PathValue("apiKeyID")
	keys, err := s.keys.ListTeamAPIKeys(r.Context(), team)
	if err != nil {
		return sandbox.APIKey{}, err
	}
	for _, k := range keys {
		if k.ID == id {
			return k, nil
		}
	}
	return sandbox.APIKey{}, sandbox.Errorf(sandbox.KindNotFound, "API key '%s' not found", id)
}

func (s *server) renameAPIKey(w http.ResponseWriter, r *http.Request, team string) error {
	k, err := s.teamKey(r, team)
	if err != nil {
		return err
	}
	name, err := s.keyName(r)
	if err != nil {
		return err
	}
	if err := s.keys.RenameAPIKey(r.Context(), k.ID, name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *server) deleteAPIKey(w http.ResponseWriter, r *http.Request, team string) error {
	k, err := s.teamKey(r, team)
	if err != nil {
		return err
	}
	if err := s.keys.DeleteAPIKey(r.Context(), k.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
