package web

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/sandbox"
)

func (s *server) routes(mux *http.ServeMux) {
	for _, rt := range []struct {
		pattern string
		h       teamHandler
	}{
		{"GET /dashboard/api/sandboxes", s.listSandboxes},
		{"GET /dashboard/api/sandboxes/stream", s.streamSandboxes},
		{"GET /dashboard/api/sandboxes/{id}", s.getSandbox},
		{"GET /dashboard/api/sandboxes/{id}/metrics", s.sandboxMetrics},
		{"GET /dashboard/api/sandboxes/{id}/logs/stream", s.streamLogs},
		{"GET /dashboard/api/sandboxes/{id}/events", s.sandboxEvents},
		{"POST /dashboard/api/sandboxes/{id}/pause", s.pause},
		{"POST /dashboard/api/sandboxes/{id}/resume", s.resume},
		{"POST /dashboard/api/sandboxes/{id}/kill", s.ops.Kill},
		{"POST /dashboard/api/sandboxes/{id}/timeout", s.extend},
		{"POST /dashboard/api/sandboxes/{id}/snapshot", s.snapshot},
		{"GET /dashboard/api/snapshots", s.listSnapshots},
		{"DELETE /dashboard/api/snapshots/{id}", s.ops.DeleteSnapshot},
		{"GET /dashboard/api/keys", s.listKeys},
		{"POST /dashboard/api/keys", s.createKey},
		{"DELETE /dashboard/api/keys/{id}", s.revokeKey},
		{"GET /dashboard/api/server", s.serverView},
	} {
		mux.Handle(rt.pattern, s.authed(rt.h))
	}
	s.templateRoutes(mux)
	s.agentRoutes(mux)
	s.fileRoutes(mux)
	s.webhookRoutes(mux)
	s.volumeRoutes(mux)
}

// getSession answers the request's session, or 204 when there is none:
// the page asks it at load to know whether to show the login form, and
// an answer of no session is not an error there.
func (s *server) getSession(w http.ResponseWriter, r *http.Request) {
	ds, err := s.session(r)
	if sandbox.KindOf(err) == sandbox.KindUnauthenticated {
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var tm sandbox.Team
	if err == nil {
		tm, err = s.st.GetTeam(r.Context(), ds.TeamID)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sessionInfo{TeamID: ds.TeamID, TeamName: tm.Name, CSRF: ds.CSRF, ExpiresAt: ds.ExpiresAt, Operator: ds.Operator})
}

// sandboxJSON is a sandbox as the views show it.
type sandboxJSON struct {
	ID         string            `json:"sandboxId"`
	TemplateID string            `json:"templateId"`
	Alias      string            `json:"alias,omitempty"`
	State      sandbox.State     `json:"state"`
	PauseMode  sandbox.PauseMode `json:"pauseMode,omitempty"`
	Runtime    string            `json:"runtime"`
	CPUCount   int               `json:"cpuCount"`
	MemoryMB   int               `json:"memoryMB"`
	DiskSizeMB int               `json:"diskSizeMB"`
	Metadata   map[string]string `json:"metadata"`
	StartedAt  time.Time         `json:"startedAt"`
	EndAt      *time.Time        `json:"endAt,omitempty"` // running only
	// TimeLeftMs is what is left of its timeout: until EndAt when
	// running, what was left at the pause when paused.
	TimeLeftMs int64 `json:"timeLeftMs"`
	// CPU and Mem are its recent samples, oldest first, for sparklines:
	// CPU in percent, Mem in bytes of MemTotal.
	CPU      []float64 `json:"cpu"`
	Mem      []int64   `json:"mem"`
	MemTotal int64     `json:"memTotal"`
}

// sparkWindow is how far back a list's sparklines reach.
const sparkWindow = 10 * time.Minute

func (s *server) sandboxOut(r *http.Request, sb sandbox.Sandbox, spark bool) sandboxJSON {
	rt := string(sb.Runtime)
	if rt == "" {
		rt = string(sandbox.RuntimeRunc)
	}
	md := sb.Metadata
	if md == nil {
		md = map[string]string{}
	}
	out := sandboxJSON{ID: sb.ID, TemplateID: sb.TemplateID, Alias: sb.Alias, State: sb.State, PauseMode: sb.PauseMode,
		Runtime: rt, CPUCount: sb.CPUCount, MemoryMB: sb.MemoryMB, DiskSizeMB: sb.DiskSizeMB, Metadata: md,
		StartedAt: sb.StartedAt, CPU: []float64{}, Mem: []int64{}}
	switch sb.State {
	case sandbox.StateRunning:
		end := sb.EndAt
		out.EndAt = &end
		out.TimeLeftMs = max(0, sb.EndAt.Sub(s.now()).Milliseconds())
	case sandbox.StatePaused:
		out.TimeLeftMs = sb.Remaining.Milliseconds()
	}
	if spark {
		now := s.now()
		samples, err := s.m.Metrics(r.Context(), sb.TeamID, sb.ID, now.Add(-sparkWindow), now)
		if err == nil {
			for _, st := range samples {
				out.CPU = append(out.CPU, st.CPUUsedPct)
				out.Mem = append(out.Mem, st.MemUsed)
				out.MemTotal = st.MemTotal
			}
		}
	}
	return out
}

// teamSandboxes lists the team's running and paused sandboxes, newest
// first.
func (s *server) teamSandboxes(r *http.Request, team string) ([]sandboxJSON, error) {
	sbs, _, err := s.m.List(r.Context(), lifecycle.ListRequest{TeamID: team, Descending: true})
	if err != nil {
		return nil, err
	}
	out := make([]sandboxJSON, 0, len(sbs))
	for _, sb := range sbs {
		out = append(out, s.sandboxOut(r, sb, true))
	}
	return out, nil
}

func (s *server) listSandboxes(w http.ResponseWriter, r *http.Request, team string) error {
	out, err := s.teamSandboxes(r, team)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// teamSandbox returns a sandbox of team; another team's is not found.
func (s *server) teamSandbox(r *http.Request, team string) (sandbox.Sandbox, error) {
	id, err := sandbox.ParseID(r.PathValue("id"))
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	return s.m.Get(r.Context(), team, id)
}

func (s *server) getSandbox(w http.ResponseWriter, r *http.Request, team string) error {
	sb, err := s.teamSandbox(r, team)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.sandboxOut(r, sb, false))
	return nil
}

type metricJSON struct {
	Time       time.Time `json:"timestamp"`
	CPUCount   int       `json:"cpuCount"`
	CPUUsedPct float64   `json:"cpuUsedPct"`
	MemUsed    int64     `json:"memUsed"`
	MemTotal   int64     `json:"memTotal"`
	DiskUsed   int64     `json:"diskUsed"`
	DiskTotal  int64     `json:"diskTotal"`
}

// sandboxMetrics answers every sample the manager keeps of a sandbox,
// over its whole life.
func (s *server) sandboxMetrics(w http.ResponseWriter, r *http.Request, team string) error {
	id, err := sandbox.ParseID(r.PathValue("id"))
	if err != nil {
		return err
	}
	samples, err := s.m.Metrics(r.Context(), team, id, time.Time{}, time.Time{})
	if err != nil {
		return err
	}
	out := make([]metricJSON, 0, len(samples))
	for _, st := range samples {
		out = append(out, metricJSON{Time: st.Time, CPUCount: st.CPUCount, CPUUsedPct: st.CPUUsedPct,
			MemUsed: st.MemUsed, MemTotal: st.MemTotal, DiskUsed: st.DiskUsed, DiskTotal: st.DiskTotal})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type eventJSON struct {
	ID          string         `json:"id"`
	Type        string         `json:"type"`
	Time        time.Time      `json:"timestamp"`
	ExecutionID string         `json:"sandboxExecutionId"`
	Data        map[string]any `json:"eventData"`
}

func (s *server) sandboxEvents(w http.ResponseWriter, r *http.Request, team string) error {
	id, err := sandbox.ParseID(r.PathValue("id"))
	if err != nil {
		return err
	}
	out := []eventJSON{}
	if s.cfg.Events != nil {
		evs, err := s.cfg.Events.Events(r.Context(), events.Query{TeamID: team, SandboxID: id, Limit: 100})
		if err != nil {
			return err
		}
		for _, ev := range evs {
			out = append(out, eventJSON{ID: ev.ID, Type: string(ev.Type), Time: ev.Time, ExecutionID: ev.ExecutionID, Data: ev.Data})
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// actionBody is the optional body of the sandbox actions.
type actionBody struct {
	KeepMemory *bool  `json:"keepMemory,omitempty"` // pause; default true
	Seconds    int64  `json:"seconds,omitempty"`    // extend timeout by
	Name       string `json:"name,omitempty"`       // snapshot
}

func (s *server) action(w http.ResponseWriter, r *http.Request, team string) (sandbox.Sandbox, actionBody, error) {
	var body actionBody
	if r.ContentLength != 0 {
		if err := decode(r, &body); err != nil {
			return sandbox.Sandbox{}, body, err
		}
	}
	sb, err := s.teamSandbox(r, team)
	return sb, body, err
}

func (s *server) pause(w http.ResponseWriter, r *http.Request, team string) error {
	sb, body, err := s.action(w, r, team)
	if err != nil {
		return err
	}
	if err := s.m.Pause(r.Context(), team, sb.ID, body.KeepMemory == nil || *body.KeepMemory); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// resumeTimeout is the life a resumed sandbox gets at least, as the
// API's default.
const resumeTimeout = 15 * time.Second

func (s *server) resume(w http.ResponseWriter, r *http.Request, team string) error {
	sb, _, err := s.action(w, r, team)
	if err != nil {
		return err
	}
	sb, err = s.m.Resume(r.Context(), team, sb.ID, max(sb.Remaining, resumeTimeout), lifecycle.ResumeOptions{})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.sandboxOut(r, sb, false))
	return nil
}

// extend gives a running sandbox Seconds more than it has left.
func (s *server) extend(w http.ResponseWriter, r *http.Request, team string) error {
	sb, body, err := s.action(w, r, team)
	if err != nil {
		return err
	}
	if body.Seconds <= 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "seconds must be positive")
	}
	if sb.State != sandbox.StateRunning {
		return sandbox.Errorf(sandbox.KindConflict, "sandbox %s is %s; only a running sandbox's timeout can be extended", sb.ID, sb.State)
	}
	left := max(0, sb.EndAt.Sub(s.now()))
	if err := s.m.SetTimeout(r.Context(), team, sb.ID, left+time.Duration(body.Seconds)*time.Second); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type snapshotJSON struct {
	ID        string    `json:"snapshotId"`
	SandboxID string    `json:"sandboxId"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

func snapshotOut(sn sandbox.Snapshot) snapshotJSON {
	return snapshotJSON{ID: sn.ID, SandboxID: sn.SandboxID, Name: sn.Name, CreatedAt: sn.CreatedAt}
}

func (s *server) snapshot(w http.ResponseWriter, r *http.Request, team string) error {
	sb, body, err := s.action(w, r, team)
	if err != nil {
		return err
	}
	sn, err := s.m.Snapshot(r.Context(), team, sb.ID, body.Name, lifecycle.MemoryIfPossible)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, snapshotOut(sn))
	return nil
}

func (s *server) listSnapshots(w http.ResponseWriter, r *http.Request, team string) error {
	sns, err := s.m.Snapshots(r.Context(), team, "", "")
	if err != nil {
		return err
	}
	out := make([]snapshotJSON, 0, len(sns))
	for _, sn := range sns {
		out = append(out, snapshotOut(sn))
	}
	slices.SortFunc(out, func(a, b snapshotJSON) int { return b.CreatedAt.Compare(a.CreatedAt) })
	writeJSON(w, http.StatusOK, out)
	return nil
}

type keyJSON struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Mask      string    `json:"mask"`
	CreatedAt time.Time `json:"createdAt"`
	Key       string    `json:"key,omitempty"` // only in the answer to its creation
}

func (s *server) listKeys(w http.ResponseWriter, r *http.Request, team string) error {
	keys, err := s.st.ListTeamAPIKeys(r.Context(), team)
	if err != nil {
		return err
	}
	out := make([]keyJSON, 0, len(keys))
	for _, k := range keys {
		out = append(out, keyJSON{ID: k.ID, Name: k.Name, Mask: k.Mask, CreatedAt: k.CreatedAt})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// maxKeyName bounds a key's name.
const maxKeyName = 100

// createKey makes an API key of the session's team and answers it once.
func (s *server) createKey(w http.ResponseWriter, r *http.Request, team string) error {
	var body struct {
		Name string `json:"name"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if len(body.Name) > maxKeyName {
		return sandbox.Errorf(sandbox.KindInvalid, "a key's name has at most %d bytes", maxKeyName)
	}
	key, k := sandbox.MakeAPIKey(team, body.Name, s.now())
	if err := s.st.CreateAPIKey(r.Context(), k); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, keyJSON{ID: k.ID, Name: k.Name, Mask: k.Mask, CreatedAt: k.CreatedAt, Key: key})
	return nil
}

// revokeKey deletes a key of the session's team; another team's is not
// found.
func (s *server) revokeKey(w http.ResponseWriter, r *http.Request, team string) error {
	id := r.PathValue("id")
	keys, err := s.st.ListTeamAPIKeys(r.Context(), team)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(keys, func(k sandbox.APIKey) bool { return k.ID == id }) {
		return sandbox.Errorf(sandbox.KindNotFound, "api key %s not found", id)
	}
	if err := s.st.DeleteAPIKey(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type serverJSON struct {
	ServerInfo
	Runtime         string         `json:"runtime"`
	Running         int            `json:"running"`
	Paused          map[string]int `json:"paused"`
	PoolReady       map[string]int `json:"poolReady"`
	PoolSize        map[string]int `json:"poolSize"`
	Checkpoints     int            `json:"checkpoints"`
	CheckpointBytes int64          `json:"checkpointBytes"`
	CheckpointError string         `json:"checkpointError,omitempty"`
	MaxTimeoutSec   int64          `json:"maxTimeoutSec"`
	DefaultCPU      int            `json:"defaultCpuCount"`
	DefaultMemoryMB int            `json:"defaultMemoryMB"`
	Checks          []Check        `json:"checks"`
}

// serverView is the server as a whole. Its counts are the server's, not
// the team's: they say what the machine carries, so only the operator's
// session (a login link) gets them, with the state dir and the checks;
// a team's key sees the settings its sandboxes get.
func (s *server) serverView(w http.ResponseWriter, r *http.Request, team string) error {
	ds, err := s.session(r)
	if err != nil {
		return err
	}
	mc := s.m.Settings()
	info := s.cfg.Info
	info.StateDir = ""
	out := serverJSON{ServerInfo: info, Runtime: string(mc.SandboxRuntime), Paused: map[string]int{}, PoolReady: map[string]int{},
		PoolSize: map[string]int{}, MaxTimeoutSec: int64(mc.MaxTimeout / time.Second), DefaultCPU: mc.CPUCount,
		DefaultMemoryMB: mc.MemoryMB, Checks: []Check{}}
	if out.Runtime == "" {
		out.Runtime = string(sandbox.RuntimeRunc)
	}
	if !ds.Operator {
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	st := s.m.ServerStats(r.Context())
	out.ServerInfo, out.Running, out.PoolReady, out.PoolSize = s.cfg.Info, st.Running, st.PoolReady, st.PoolSize
	out.Checkpoints, out.CheckpointBytes = st.Checkpoints, st.CheckpointBytes
	for m, n := range st.Paused {
		out.Paused[string(m)] = n
	}
	if st.CheckpointErr != nil {
		out.CheckpointError = st.CheckpointErr.Error()
	}
	if s.cfg.Checks != nil {
		out.Checks = s.cfg.Checks(r.Context())
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// parseInt reads an optional non-negative integer query parameter.
func parseInt(r *http.Request, name string) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, sandbox.Errorf(sandbox.KindInvalid, "%s=%q: want a non-negative integer", name, v)
	}
	return n, nil
}
