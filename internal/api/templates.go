package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/template"
)

// UploadPath is where build context uploads go: the URL the files
// endpoint hands out. The token in it is the only credential, because the
// SDK sends no API key with the upload.
const UploadPath = "/_warren/uploads/"

// registerTemplates adds the template routes when templates are
// configured.
func (s *server) registerTemplates(mux *http.ServeMux) {
	if s.tpl == nil {
		return
	}
	for pattern, h := range map[string]handler{
		"POST /v3/templates":                          s.requestBuildV3,
		"POST /v2/templates":                          s.requestBuildV2,
		"POST /templates":                             s.requestBuildV1,
		"GET /templates/{id}/files/{hash}":            s.fileUpload,
		"POST /v2/templates/{id}/builds/{buildID}":    s.startBuild,
		"GET /templates/{id}/builds/{buildID}/status": s.buildStatus,
		"GET /templates/{id}/builds/{buildID}/logs":   s.buildLogs,
		"GET /templates":                              s.listTemplates,
		"GET /v2/templates":                           s.listTemplatesV2,
		"GET /templates/{id}":                         s.getTemplate,
		"GET /templates/aliases/{alias}":              s.alias,
		"POST /templates/tags":                        s.assignTags,
		"DELETE /templates/tags":                      s.removeTags,
		// Not "GET /templates/{id}/tags": it would clash with the alias
		// route, neither being more specific.
		"GET /templates/{id}/{sub}": s.templateSub,
		"PATCH /templates/{id}":     s.updateTemplate,
		"PATCH /v2/templates/{id}":  s.updateTemplate,
	} {
		mux.Handle(pattern, s.wrap(h))
	}
	mux.HandleFunc("PUT "+UploadPath+"{token}", s.upload)
}

// deleteTemplate serves DELETE /templates/{id}: snapshots first (the
// SDK deletes them this way), then templates.
func (s *server) deleteTemplate(w http.ResponseWriter, r *http.Request, team string) error {
	err := s.ops.DeleteSnapshot(w, r, team)
	if s.tpl == nil || sandbox.KindOf(err) != sandbox.KindNotFound {
		return err
	}
	if err := s.tpl.Delete(r.Context(), team, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type buildRequestJSON struct {
	Name     string   `json:"name"`
	Alias    string   `json:"alias"`
	Tags     []string `json:"tags"`
	CPUCount *int     `json:"cpuCount"`
	MemoryMB *int     `json:"memoryMB"`
	// MinFreeDiskMB is met when the server gives each sandbox at least
	// that much disk: a sandbox's writable layer starts empty, and Warren
	// never grows a template's filesystem.
	MinFreeDiskMB *int `json:"minFreeDiskMb"`
	// TeamID (deprecated by E2B) may only name the caller's team.
	TeamID string `json:"teamID"`
	// Legacy (POST /templates) only.
	Dockerfile string `json:"dockerfile"`
	StartCmd   string `json:"startCmd"`
	ReadyCmd   string `json:"readyCmd"`
}

// toRequest checks the request of team, its resources against the
// server's maxima too, and turns it into the registry's.
func (s *server) toRequest(req buildRequestJSON, team string) (template.BuildRequest, error) {
	out := template.BuildRequest{Name: req.Name, Tags: req.Tags}
	if err := checkTeamID(req.TeamID, team); err != nil {
		return out, err
	}
	if err := s.checkMinFreeDisk(req.MinFreeDiskMB); err != nil {
		return out, err
	}
	if out.Name == "" {
		out.Name = req.Alias
	}
	if req.CPUCount != nil {
		if *req.CPUCount < 1 {
			return out, sandbox.Errorf(sandbox.KindInvalid, "cpuCount must be at least 1")
		}
		out.CPUCount = *req.CPUCount
	}
	if req.MemoryMB != nil {
		if *req.MemoryMB < 128 {
			return out, sandbox.Errorf(sandbox.KindInvalid, "memoryMB must be at least 128")
		}
		out.MemoryMB = *req.MemoryMB
	}
	return out, s.m.CheckResources(out.CPUCount, out.MemoryMB)
}

// checkMinFreeDisk refuses a minimum of free disk that the server's
// sandboxes do not get: Warren cannot grow a template's filesystem.
func (s *server) checkMinFreeDisk(mb *int) error {
	if mb == nil {
		return nil
	}
	if *mb < 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "minFreeDiskMb must be at least 0")
	}
	if disk := s.m.Settings().DiskSizeMB; *mb > disk {
		return sandbox.Errorf(sandbox.KindInvalid,
			"minFreeDiskMb %d is more than the %d MiB of disk each sandbox of this server gets (--disk-size-mb); Warren does not grow a template's filesystem", *mb, disk)
	}
	return nil
}

// checkTeamID refuses a teamID (in a body or a query) that is not the
// caller's own: an API key acts for one team.
func checkTeamID(teamID, team string) error {
	if teamID != "" && teamID != team {
		return sandbox.Errorf(sandbox.KindForbidden, "teamID '%s' is not the team of your API key", teamID)
	}
	return nil
}

func (s *server) requestBuild(r *http.Request, team string) (buildRequestJSON, template.Template, template.Build, error) {
	var body buildRequestJSON
	if err := decode(r, &body); err != nil {
		return body, template.Template{}, template.Build{}, err
	}
	req, err := s.toRequest(body, team)
	if err != nil {
		return body, template.Template{}, template.Build{}, err
	}
	t, b, err := s.tpl.RequestBuild(r.Context(), team, req)
	return body, t, b, err
}

type buildResponseV3JSON struct {
	TemplateID string   `json:"templateID"`
	BuildID    string   `json:"buildID"`
	Public     bool     `json:"public"`
	Names      []string `json:"names"`
	Tags       []string `json:"tags"`
	Aliases    []string `json:"aliases"`
}

func (s *server) requestBuildV3(w http.ResponseWriter, r *http.Request, team string) error {
	_, t, b, err := s.requestBuild(r, team)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusAccepted, buildResponseV3JSON{
		TemplateID: t.ID, BuildID: b.ID, Public: t.Public, Names: t.Names, Tags: b.Tags, Aliases: t.Names,
	})
	return nil
}

func (s *server) requestBuildV2(w http.ResponseWriter, r *http.Request, team string) error {
	_, t, b, err := s.requestBuild(r, team)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusAccepted, s.templateJSON(t, b, []template.Build{b}))
	return nil
}

// requestBuildV1 serves the legacy API, where the request carries the
// Dockerfile and the build starts at once, with no build context.
func (s *server) requestBuildV1(w http.ResponseWriter, r *http.Request, team string) error {
	var body buildRequestJSON
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Dockerfile == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "dockerfile is required")
	}
	spec, _, err := template.ParseDockerfile(body.Dockerfile, "")
	if err != nil {
		return err
	}
	for _, st := range spec.Steps {
		if st.Type == template.StepCopy {
			return sandbox.Errorf(sandbox.KindInvalid, "COPY needs a build context, which this API cannot upload; use Template.build or warren template build")
		}
	}
	if body.StartCmd != "" {
		spec.StartCmd = body.StartCmd
	}
	spec.ReadyCmd = body.ReadyCmd
	req, err := s.toRequest(body, team)
	if err != nil {
		return err
	}
	t, b, err := s.tpl.RequestBuild(r.Context(), team, req)
	if err != nil {
		return err
	}
	if err := s.tpl.StartBuild(r.Context(), team, t.ID, b.ID, spec); err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusAccepted, s.templateJSON(t, b, []template.Build{b}))
	return nil
}

type fileUploadJSON struct {
	Present bool   `json:"present"`
	URL     string `json:"url,omitempty"`
}

func (s *server) fileUpload(w http.ResponseWriter, r *http.Request, team string) error {
	present, token, err := s.tpl.FileUpload(r.Context(), team, r.PathValue("id"), r.PathValue("hash"))
	if err != nil {
		return err
	}
	out := fileUploadJSON{Present: present, URL: baseURL(r) + UploadPath + token}
	httpedge.WriteJSON(w, http.StatusCreated, out)
	return nil
}

// baseURL is how the client reached this server, so that the upload URL
// works from where the client is.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// upload serves the PUT of a build context to a URL fileUpload issued.
func (s *server) upload(w http.ResponseWriter, r *http.Request) {
	if len(r.TransferEncoding) > 0 {
		httpedge.WriteError(w, sandbox.Errorf(sandbox.KindInvalid, "send the upload with a Content-Length, not chunked"))
		return
	}
	if err := s.tpl.Upload(r.PathValue("token"), r.ContentLength, r.Body); err != nil {
		if sandbox.KindOf(err) == sandbox.KindInternal {
			s.log.Error("upload failed", "err", err)
		}
		httpedge.WriteError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// startBuildJSON is E2B's TemplateBuildStartV2.
type startBuildJSON struct {
	template.BuildSpec
	// FromImageRegistry is refused: the builder pulls base images with
	// no credentials.
	FromImageRegistry json.RawMessage `json:"fromImageRegistry"`
}

func (s *server) startBuild(w http.ResponseWriter, r *http.Request, team string) error {
	var req startBuildJSON
	if err := decode(r, &req); err != nil {
		return err
	}
	if len(req.FromImageRegistry) > 0 && string(req.FromImageRegistry) != "null" {
		return sandbox.Errorf(sandbox.KindInvalid,
			"fromImageRegistry is not supported: this server pulls base images without credentials; pull the image on the server's engine first, then build from it without registry credentials")
	}
	if err := s.tpl.StartBuild(r.Context(), team, r.PathValue("id"), r.PathValue("buildID"), req.BuildSpec); err != nil {
		return err
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

type buildLogJSON struct {
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"`
	Message   string    `json:"message"`
	Step      string    `json:"step,omitempty"`
}

type reasonJSON struct {
	Message    string         `json:"message"`
	Step       string         `json:"step,omitempty"`
	LogEntries []buildLogJSON `json:"logEntries"`
}

type buildStatusJSON struct {
	TemplateID string         `json:"templateID"`
	BuildID    string         `json:"buildID"`
	Status     string         `json:"status"`
	LogEntries []buildLogJSON `json:"logEntries"`
	Logs       []string       `json:"logs"`
	Reason     *reasonJSON    `json:"reason,omitempty"`
}

func logsOut(entries []template.LogEntry) []buildLogJSON {
	out := make([]buildLogJSON, 0, len(entries))
	for _, e := range entries {
		out = append(out, buildLogJSON{Timestamp: e.Time, Level: e.Level, Message: e.Message, Step: e.Step})
	}
	return out
}

func (s *server) buildStatus(w http.ResponseWriter, r *http.Request, team string) error {
	q := r.URL.Query()
	offset, err := intParam(q.Get("logsOffset"), 0, 0, 1<<30, "logsOffset")
	if err != nil {
		return err
	}
	limit, err := intParam(q.Get("limit"), 100, 0, 100, "limit")
	if err != nil {
		return err
	}
	b, entries, err := s.tpl.Status(r.Context(), team, r.PathValue("id"), r.PathValue("buildID"), offset, limit, q.Get("level"))
	if err != nil {
		return err
	}
	out := buildStatusJSON{
		TemplateID: b.TemplateID, BuildID: b.ID, Status: string(b.Status),
		LogEntries: logsOut(entries), Logs: []string{},
	}
	if b.Reason != nil {
		out.Reason = &reasonJSON{Message: b.Reason.Message, Step: b.Reason.Step, LogEntries: []buildLogJSON{}}
		// The reason carries the failing step's last lines.
		if all, _, err := s.reasonLogs(r, team, b); err == nil {
			out.Reason.LogEntries = all
		}
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

// reasonLogs returns up to the last 20 entries of a failed build's step.
func (s *server) reasonLogs(r *http.Request, team string, b template.Build) ([]buildLogJSON, bool, error) {
	entries, err := s.tpl.Logs(r.Context(), team, b.TemplateID, b.ID, template.LogQuery{Backward: true, Limit: 20})
	if err != nil {
		return nil, false, err
	}
	entries = slices.DeleteFunc(entries, func(e template.LogEntry) bool { return b.Reason.Step != "" && e.Step != b.Reason.Step })
	slices.Reverse(entries)
	return logsOut(entries), true, nil
}

func (s *server) buildLogs(w http.ResponseWriter, r *http.Request, team string) error {
	q := r.URL.Query()
	cursor, err := unixParam(q.Get("cursor"), "cursor", true)
	if err != nil {
		return err
	}
	limit, err := intParam(q.Get("limit"), 100, 0, 100, "limit")
	if err != nil {
		return err
	}
	dir := q.Get("direction")
	if dir != "" && dir != "forward" && dir != "backward" {
		return sandbox.Errorf(sandbox.KindInvalid, "direction must be forward or backward")
	}
	// Both sources are the same here: a build's log is kept whole, live
	// and after the build, in one store.
	if src := q.Get("source"); src != "" && src != "temporary" && src != "persistent" {
		return sandbox.Errorf(sandbox.KindInvalid, "source must be temporary or persistent")
	}
	entries, err := s.tpl.Logs(r.Context(), team, r.PathValue("id"), r.PathValue("buildID"), template.LogQuery{
		Cursor: cursor, Limit: limit, Backward: dir == "backward", Level: q.Get("level"),
	})
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusOK, map[string]any{"logs": logsOut(entries)})
	return nil
}

type templateJSON struct {
	TemplateID    string     `json:"templateID"`
	BuildID       string     `json:"buildID"`
	CPUCount      int        `json:"cpuCount"`
	MemoryMB      int        `json:"memoryMB"`
	DiskSizeMB    int        `json:"diskSizeMB"`
	Public        bool       `json:"public"`
	Aliases       []string   `json:"aliases"`
	Names         []string   `json:"names"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	CreatedBy     *struct{}  `json:"createdBy"`
	LastSpawnedAt *time.Time `json:"lastSpawnedAt"`
	SpawnCount    int        `json:"spawnCount"`
	BuildCount    int        `json:"buildCount"`
	EnvdVersion   string     `json:"envdVersion"`
	BuildStatus   string     `json:"buildStatus"`
}

// templateJSON describes t by its build b (the latest) among builds.
func (s *server) templateJSON(t template.Template, b template.Build, builds []template.Build) templateJSON {
	mc := s.m.Settings()
	out := templateJSON{
		TemplateID: t.ID, BuildID: b.ID, CPUCount: t.CPUCount, MemoryMB: t.MemoryMB, DiskSizeMB: mc.DiskSizeMB,
		Public: t.Public, Aliases: t.Names, Names: t.Names, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		BuildCount: len(builds), EnvdVersion: s.envdVer, BuildStatus: string(b.Status),
	}
	// What its sandboxes get: the server's default, and never above the
	// server's maxima (a template may have been built before they were
	// lowered).
	if out.CPUCount == 0 {
		out.CPUCount = mc.CPUCount
	}
	if out.MemoryMB == 0 {
		out.MemoryMB = mc.MemoryMB
	}
	out.CPUCount, out.MemoryMB = min(out.CPUCount, mc.MaxCPUCount), min(out.MemoryMB, mc.MaxMemoryMB)
	if out.Names == nil {
		out.Names, out.Aliases = []string{}, []string{}
	}
	return out
}

func (s *server) templatesOut(r *http.Request, team string) ([]templateJSON, error) {
	all, err := s.tpl.Templates(r.Context(), team)
	if err != nil {
		return nil, err
	}
	out := make([]templateJSON, 0, len(all))
	for _, t := range all {
		builds, err := s.tpl.Builds(r.Context(), t.ID)
		if err != nil {
			return nil, err
		}
		var last template.Build
		if len(builds) > 0 {
			last = builds[len(builds)-1]
		}
		out = append(out, s.templateJSON(t, last, builds))
	}
	return out, nil
}

func (s *server) listTemplates(w http.ResponseWriter, r *http.Request, team string) error {
	if err := checkTeamID(r.URL.Query().Get("teamID"), team); err != nil {
		return err
	}
	out, err := s.templatesOut(r, team)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

// listTemplatesV2 pages the list; the next token is the last template ID.
func (s *server) listTemplatesV2(w http.ResponseWriter, r *http.Request, team string) error {
	q := r.URL.Query()
	if err := checkTeamID(q.Get("teamID"), team); err != nil {
		return err
	}
	limit, err := intParam(q.Get("limit"), 100, 1, 100, "limit")
	if err != nil {
		return err
	}
	out, err := s.templatesOut(r, team)
	if err != nil {
		return err
	}
	out, err = pageAfter(w, out, q.Get("nextToken"), limit, func(t templateJSON) string { return t.TemplateID })
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

type templateBuildJSON struct {
	BuildID     string     `json:"buildID"`
	Status      string     `json:"status"`
	CPUCount    int        `json:"cpuCount"`
	MemoryMB    int        `json:"memoryMB"`
	DiskSizeMB  int        `json:"diskSizeMB"`
	EnvdVersion string     `json:"envdVersion"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	FinishedAt  *time.Time `json:"finishedAt,omitempty"`
}

type templateWithBuildsJSON struct {
	TemplateID    string              `json:"templateID"`
	Public        bool                `json:"public"`
	Aliases       []string            `json:"aliases"`
	Names         []string            `json:"names"`
	CreatedAt     time.Time           `json:"createdAt"`
	UpdatedAt     time.Time           `json:"updatedAt"`
	LastSpawnedAt *time.Time          `json:"lastSpawnedAt"`
	SpawnCount    int                 `json:"spawnCount"`
	Builds        []templateBuildJSON `json:"builds"`
}

// getTemplate describes a template with a page of its builds, oldest
// first; the next token is the ID of the last build returned.
func (s *server) getTemplate(w http.ResponseWriter, r *http.Request, team string) error {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), 100, 1, 100, "limit")
	if err != nil {
		return err
	}
	t, err := s.tpl.Template(r.Context(), team, r.PathValue("id"))
	if err != nil {
		return err
	}
	builds, err := s.tpl.Builds(r.Context(), t.ID)
	if err != nil {
		return err
	}
	tj := s.templateJSON(t, template.Build{}, builds)
	builds, err = pageAfter(w, builds, q.Get("nextToken"), limit, func(b template.Build) string { return b.ID })
	if err != nil {
		return err
	}
	out := templateWithBuildsJSON{
		TemplateID: t.ID, Public: t.Public, Aliases: tj.Aliases, Names: tj.Names,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Builds: []templateBuildJSON{},
	}
	for _, b := range builds {
		bj := templateBuildJSON{
			BuildID: b.ID, Status: string(b.Status), CPUCount: tj.CPUCount, MemoryMB: tj.MemoryMB,
			DiskSizeMB: tj.DiskSizeMB, EnvdVersion: s.envdVer, CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt,
		}
		if !b.FinishedAt.IsZero() {
			bj.FinishedAt = &b.FinishedAt
		}
		out.Builds = append(out.Builds, bj)
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) alias(w http.ResponseWriter, r *http.Request, team string) error {
	t, err := s.tpl.Alias(r.Context(), team, r.PathValue("alias"))
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusOK, map[string]any{"templateID": t.ID, "public": t.Public})
	return nil
}

func (s *server) assignTags(w http.ResponseWriter, r *http.Request, team string) error {
	var body struct {
		Target string   `json:"target"`
		Tags   []string `json:"tags"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	buildID, err := s.tpl.AssignTags(r.Context(), team, body.Target, body.Tags)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusCreated, map[string]any{"tags": body.Tags, "buildID": buildID})
	return nil
}

func (s *server) removeTags(w http.ResponseWriter, r *http.Request, team string) error {
	var body struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if err := s.tpl.RemoveTags(r.Context(), team, body.Name, body.Tags); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) templateSub(w http.ResponseWriter, r *http.Request, team string) error {
	if r.PathValue("sub") != "tags" {
		return sandbox.Errorf(sandbox.KindNotFound, "%s %s not found", r.Method, r.URL.Path)
	}
	return s.templateTags(w, r, team)
}

func (s *server) templateTags(w http.ResponseWriter, r *http.Request, team string) error {
	tags, err := s.tpl.Tags(r.Context(), team, r.PathValue("id"))
	if err != nil {
		return err
	}
	type tagJSON struct {
		Tag       string    `json:"tag"`
		BuildID   string    `json:"buildID"`
		CreatedAt time.Time `json:"createdAt"`
	}
	out := make([]tagJSON, 0, len(tags))
	for _, t := range tags {
		out = append(out, tagJSON{Tag: t.Tag, BuildID: t.BuildID, CreatedAt: t.CreatedAt})
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) updateTemplate(w http.ResponseWriter, r *http.Request, team string) error {
	var body struct {
		Public *bool `json:"public"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	t, err := s.tpl.Update(r.Context(), team, r.PathValue("id"), body.Public)
	if err != nil {
		return err
	}
	names := t.Names
	if names == nil {
		names = []string{}
	}
	httpedge.WriteJSON(w, http.StatusOK, map[string]any{"names": names})
	return nil
}
