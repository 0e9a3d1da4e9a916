package api

import (
	"net/http"

	"github.com/warrenhq/warren/internal/lifecycle"
)

// Ops are the control plane's handlers that the dashboard serves too, on
// its own paths and behind its own session: where the request, the work
// and the answer are the same, one handler serves both.
type Ops struct{ m *lifecycle.Manager }

// NewOps returns the shared handlers, over m.
func NewOps(m *lifecycle.Manager) Ops { return Ops{m: m} }

// Kill kills the team's sandbox {id}: 204.
func (o Ops) Kill(w http.ResponseWriter, r *http.Request, team string) error {
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	if err := o.m.Kill(r.Context(), team, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// DeleteSnapshot deletes the team's snapshot {id}: 204. The API serves it
// at DELETE /templates/{id} for snapshot IDs, which is how the SDK
// deletes snapshots.
func (o Ops) DeleteSnapshot(w http.ResponseWriter, r *http.Request, team string) error {
	if err := o.m.DeleteSnapshot(r.Context(), team, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
