package api

import (
	"net/http"
	"slices"
	"time"

	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

func (s *server) createSnapshot(w http.ResponseWriter, r *http.Request, team string) error {
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	var req struct {
		Name string `json:"name"`
		// Memory is Warren's own (E2B's snapshots always keep memory):
		// true requires the sandbox's memory and processes, false saves
		// its filesystem only; absent keeps memory where the runtime can.
		Memory *bool `json:"memory"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	memory := lifecycle.MemoryIfPossible
	switch {
	case req.Memory == nil:
	case *req.Memory:
		memory = lifecycle.MemoryRequired
	default:
		memory = lifecycle.MemoryNone
	}
	sn, err := s.m.Snapshot(r.Context(), team, id, req.Name, memory)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusCreated, snapshotOut(sn))
	return nil
}

// listSnapshots pages the team's snapshots; the next token is the ID of
// the last snapshot returned.
func (s *server) listSnapshots(w http.ResponseWriter, r *http.Request, team string) error {
	q := r.URL.Query()
	var sandboxFilter string
	if v := q.Get("sandboxID"); v != "" {
		id, err := sandbox.ParseID(v)
		if err != nil {
			return err
		}
		sandboxFilter = id
	}
	limit, err := intParam(q.Get("limit"), 100, 1, 100, "limit")
	if err != nil {
		return err
	}
	all, err := s.m.Snapshots(r.Context(), team, sandboxFilter, q.Get("name"))
	if err != nil {
		return err
	}
	all, err = pageAfter(w, all, q.Get("nextToken"), limit, func(sn sandbox.Snapshot) string { return sn.ID })
	if err != nil {
		return err
	}
	out := make([]snapshotJSON, 0, len(all))
	for _, sn := range all {
		out = append(out, snapshotOut(sn))
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

type forkResultJSON struct {
	Sandbox *sandboxJSON   `json:"sandbox,omitempty"`
	Error   *httpedge.Body `json:"error,omitempty"`
}

func (s *server) fork(w http.ResponseWriter, r *http.Request, team string) error {
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	var req struct {
		Timeout *int64 `json:"timeout"`
		Count   *int   `json:"count"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	count := 1
	if req.Count != nil {
		count = *req.Count
	}
	results, err := s.m.Fork(r.Context(), team, id, timeoutOr(req.Timeout, 15*time.Second), count)
	if err != nil {
		return err
	}
	out := make([]forkResultJSON, 0, len(results))
	for _, res := range results {
		if res.Err != nil {
			s.log.Error("fork failed", logkey.Sandbox, id, "err", res.Err)
			e := httpedge.ErrorOf(res.Err)
			out = append(out, forkResultJSON{Error: &e})
			continue
		}
		sj := s.sandboxJSON(res.Sandbox)
		out = append(out, forkResultJSON{Sandbox: &sj})
	}
	httpedge.WriteJSON(w, http.StatusCreated, out)
	return nil
}

// pageAfter cuts items to one page: those after the item whose ID is next
// (the previous page's X-Next-Token; none: from the start), limit at most,
// and sets X-Next-Token when more follow. An unknown token is a 400.
func pageAfter[T any](w http.ResponseWriter, items []T, next string, limit int, id func(T) string) ([]T, error) {
	if next != "" {
		i := slices.IndexFunc(items, func(it T) bool { return id(it) == next })
		if i < 0 {
			return nil, sandbox.Errorf(sandbox.KindInvalid, "invalid next token")
		}
		items = items[i+1:]
	}
	if len(items) > limit {
		items = items[:limit]
		w.Header().Set("X-Next-Token", id(items[limit-1]))
	}
	return items, nil
}
