package web

import (
	"net/http"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// The operator's API: every team with its use and limits, a team's quota
// set, every sandbox of a team killed, and the server's drain mode. Only
// an operator session (a login link of `warren dashboard`, which needs
// the state dir, or single sign-on by a user the provider's operator
// claim names) may use it; a team's session is forbidden.

func (s *server) registerOperator(mux *http.ServeMux) {
	mux.Handle("GET /dashboard/api/operator/teams", s.operator(s.listTeams))
	mux.Handle("PUT /dashboard/api/operator/teams/{team}/quota", s.operator(s.setQuota))
	mux.Handle("POST /dashboard/api/operator/teams/{team}/kill", s.operator(s.killTeam))
	mux.Handle("GET /dashboard/api/operator/drain", s.operator(s.getDrain))
	mux.Handle("PUT /dashboard/api/operator/drain", s.operator(s.setDrain))
}

// operator wraps h as authed does, and refuses a session that is not the
// operator's.
func (s *server) operator(h teamHandler) http.Handler {
	return s.authed(func(w http.ResponseWriter, r *http.Request, team string) error {
		ds, err := s.session(r)
		if err != nil {
			return err
		}
		if !ds.Operator {
			return sandbox.Errorf(sandbox.KindForbidden, "only the server's operator (a login link of `warren dashboard`, or single sign-on with the operator claim) may do this")
		}
		return h(w, r, team)
	})
}

// teamQuotaJSON is a team as the operator sees it: what it holds, its
// limits in effect, and its own quota (the fields it sets; the others
// are the server's defaults).
type teamQuotaJSON struct {
	ID     string         `json:"id"`
	Name   string         `json:"name"`
	Usage  sandbox.Usage  `json:"usage"`
	Limits sandbox.Limits `json:"limits"`
	Quota  sandbox.Quota  `json:"quota"`
}

func (s *server) listTeams(w http.ResponseWriter, r *http.Request, _ string) error {
	teams, err := s.st.ListTeams(r.Context())
	if err != nil {
		return err
	}
	use, def := s.m.TeamUsage(), s.m.Settings().TeamLimits
	out := make([]teamQuotaJSON, 0, len(teams))
	for _, t := range teams {
		out = append(out, teamQuotaJSON{ID: t.ID, Name: t.Name, Usage: use[t.ID], Limits: t.Quota.Over(def), Quota: t.Quota})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// setQuota replaces a team's quota, making the team if new (as `warren
// teams set` does): a field left out (or null) is the server's default, 0
// is no limit. It holds from the next create.
func (s *server) setQuota(w http.ResponseWriter, r *http.Request, _ string) error {
	var q sandbox.Quota
	if err := decode(r, &q); err != nil {
		return err
	}
	if err := q.Validate(); err != nil {
		return err
	}
	id := r.PathValue("team")
	if _, err := s.st.GetTeam(r.Context(), id); sandbox.KindOf(err) == sandbox.KindNotFound {
		err = s.st.PutTeam(r.Context(), sandbox.Team{ID: id, Name: id, CreatedAt: s.now().UTC()})
		if err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if err := s.st.SetTeamQuota(r.Context(), id, q); err != nil {
		return err
	}
	t, err := s.st.GetTeam(r.Context(), id)
	if err != nil {
		return err
	}
	s.log.Info("team quota set", logkey.Team, id, "limits", t.Quota.Over(s.m.Settings().TeamLimits).String())
	writeJSON(w, http.StatusOK, teamQuotaJSON{ID: t.ID, Name: t.Name, Usage: s.m.TeamUsage()[t.ID],
		Limits: t.Quota.Over(s.m.Settings().TeamLimits), Quota: t.Quota})
	return nil
}

func (s *server) killTeam(w http.ResponseWriter, r *http.Request, _ string) error {
	id := r.PathValue("team")
	if _, err := s.st.GetTeam(r.Context(), id); err != nil {
		return err
	}
	n, err := s.m.KillTeam(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"killed": n})
	return nil
}

type drainJSON struct {
	Draining bool `json:"draining"`
}

func (s *server) getDrain(w http.ResponseWriter, r *http.Request, _ string) error {
	writeJSON(w, http.StatusOK, drainJSON{Draining: s.m.Draining()})
	return nil
}

func (s *server) setDrain(w http.ResponseWriter, r *http.Request, _ string) error {
	var d drainJSON
	if err := decode(r, &d); err != nil {
		return err
	}
	s.m.SetDraining(d.Draining)
	writeJSON(w, http.StatusOK, drainJSON{Draining: s.m.Draining()})
	return nil
}
