package api

import (
	"net/http"
	"time"

	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/sandbox"
)

// E2B's team endpoints: the caller's team, and its sandboxes over time
// (from the lifecycle events, so as far back as --events-retention).

func (s *server) registerTeams(mux *http.ServeMux) {
	mux.Handle("GET /teams", s.wrap(s.listTeams))
	if s.events == nil {
		return
	}
	mux.Handle("GET /teams/{teamID}/metrics", s.wrap(s.teamMetrics))
	mux.Handle("GET /teams/{teamID}/metrics/max", s.wrap(s.teamMetricsMax))
}

type teamJSON struct {
	TeamID    string `json:"teamID"`
	Name      string `json:"name"`
	APIKey    string `json:"apiKey"`
	IsDefault bool   `json:"isDefault"`
}

// listTeams lists the teams of the caller: an API key has one.
func (s *server) listTeams(w http.ResponseWriter, r *http.Request, team string) error {
	t, err := s.keys.GetTeam(r.Context(), team)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusOK, []teamJSON{{TeamID: t.ID, Name: t.Name, APIKey: r.Header.Get("X-API-Key"), IsDefault: true}})
	return nil
}

// metricsRange reads start and end (Unix seconds; default the last hour)
// of a request for team's metrics; another team's are forbidden.
func metricsRange(r *http.Request, team string) (time.Time, time.Time, error) {
	if r.PathValue("teamID") != team {
		return time.Time{}, time.Time{}, sandbox.Errorf(sandbox.KindForbidden, "you have no access to team '%s'", r.PathValue("teamID"))
	}
	q := r.URL.Query()
	start, err := unixParam(q.Get("start"), "start", false)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	end, err := unixParam(q.Get("end"), "end", false)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	if end.IsZero() {
		end = time.Now().Truncate(time.Second)
	}
	if start.IsZero() {
		start = end.Add(-time.Hour)
	}
	if !start.Before(end) {
		return time.Time{}, time.Time{}, sandbox.Errorf(sandbox.KindInvalid, "start must be before end")
	}
	return start, end, nil
}

type teamMetricJSON struct {
	Timestamp           time.Time `json:"timestamp"`
	TimestampUnix       int64     `json:"timestampUnix"`
	ConcurrentSandboxes int       `json:"concurrentSandboxes"`
	SandboxStartRate    float64   `json:"sandboxStartRate"`
}

func (s *server) teamMetrics(w http.ResponseWriter, r *http.Request, team string) error {
	start, end, err := metricsRange(r, team)
	if err != nil {
		return err
	}
	ms, err := s.events.TeamMetrics(r.Context(), team, start, end)
	if err != nil {
		return err
	}
	out := make([]teamMetricJSON, 0, len(ms))
	for _, m := range ms {
		out = append(out, teamMetricJSON{Timestamp: m.Time.UTC(), TimestampUnix: m.Time.Unix(),
			ConcurrentSandboxes: m.Concurrent, SandboxStartRate: m.StartRate})
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

type maxTeamMetricJSON struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	Value         float64   `json:"value"`
}

func (s *server) teamMetricsMax(w http.ResponseWriter, r *http.Request, team string) error {
	start, end, err := metricsRange(r, team)
	if err != nil {
		return err
	}
	var value func(events.TeamMetric) float64
	switch metric := r.URL.Query().Get("metric"); metric {
	case "concurrent_sandboxes":
		value = func(m events.TeamMetric) float64 { return float64(m.Concurrent) }
	case "sandbox_start_rate":
		value = func(m events.TeamMetric) float64 { return m.StartRate }
	default:
		return sandbox.Errorf(sandbox.KindInvalid, "metric must be concurrent_sandboxes or sandbox_start_rate, not '%s'", metric)
	}
	ms, err := s.events.TeamMetrics(r.Context(), team, start, end)
	if err != nil {
		return err
	}
	best := ms[0]
	for _, m := range ms[1:] {
		if value(m) > value(best) {
			best = m
		}
	}
	httpedge.WriteJSON(w, http.StatusOK, maxTeamMetricJSON{Timestamp: best.Time.UTC(), TimestampUnix: best.Time.Unix(), Value: value(best)})
	return nil
}
