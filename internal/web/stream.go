package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/template"
)

// sse writes server-sent events to a response.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	s.rc.Flush()
	return s
}

// send writes one event of JSON data and flushes it.
func (s *sse) send(event string, data []byte) error {
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return err
	}
	return s.rc.Flush()
}

// ping keeps an idle stream's connection from looking dead to proxies.
func (s *sse) ping() error {
	if _, err := fmt.Fprint(s.w, ": ping\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

// pingEvery is how often an unchanged stream sends a comment.
const pingEvery = 15 * time.Second

// poll calls f now and every Poll until the request ends or f fails;
// streams built on it see changes within one Poll.
func (s *server) poll(r *http.Request, out *sse, f func() error) error {
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	last := time.Now()
	for {
		if err := f(); err != nil {
			return err
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-t.C:
			if time.Since(last) >= pingEvery {
				if err := out.ping(); err != nil {
					return nil
				}
				last = time.Now()
			}
		}
	}
}

// streamSandboxes sends the team's list as a "sandboxes" event each time
// it changes: a sandbox made, paused, resumed or killed, or new samples.
func (s *server) streamSandboxes(w http.ResponseWriter, r *http.Request, team string) error {
	if _, err := s.teamSandboxes(r, team); err != nil {
		return err
	}
	out := startSSE(w)
	var prev []byte
	return s.poll(r, out, func() error {
		list, err := s.teamSandboxes(r, team)
		if err != nil {
			return nil // the stream is open; the next round tries again
		}
		b, _ := json.Marshal(list)
		// Times left tick every round; compare without them so that an
		// unchanged list is not resent each second.
		for i := range list {
			list[i].TimeLeftMs = 0
		}
		key, _ := json.Marshal(list)
		if bytes.Equal(key, prev) {
			return nil
		}
		prev = key
		return out.send("sandboxes", b)
	})
}

type logJSON struct {
	Time    time.Time         `json:"timestamp"`
	Level   string            `json:"level"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// streamLogs sends a sandbox's log, then its new lines as they come, as
// "logs" events of arrays of lines.
func (s *server) streamLogs(w http.ResponseWriter, r *http.Request, team string) error {
	id, err := sandbox.ParseID(r.PathValue("id"))
	if err != nil {
		return err
	}
	if _, err := s.m.Logs(r.Context(), team, id, sandbox.LogQuery{Limit: 1}); err != nil {
		return err
	}
	out := startSSE(w)
	var since time.Time
	seen := map[string]bool{} // lines at exactly since, already sent
	return s.poll(r, out, func() error {
		entries, err := s.m.Logs(r.Context(), team, id, sandbox.LogQuery{Since: since})
		if err != nil {
			return nil
		}
		var batch []logJSON
		for _, e := range entries {
			k := e.Time.String() + "\x00" + e.Message
			if e.Time.Before(since) || seen[k] {
				continue
			}
			if e.Time.After(since) {
				since, seen = e.Time, map[string]bool{}
			}
			seen[k] = true
			batch = append(batch, logJSON{Time: e.Time, Level: e.Level, Message: e.Message, Fields: e.Fields})
		}
		if len(batch) == 0 {
			return nil
		}
		b, _ := json.Marshal(batch)
		return out.send("logs", b)
	})
}

func (s *server) templateRoutes(mux *http.ServeMux) {
	mux.Handle("GET /dashboard/api/templates", s.authed(s.listTemplates))
	mux.Handle("GET /dashboard/api/templates/{id}/builds", s.authed(s.listBuilds))
	mux.Handle("GET /dashboard/api/templates/{id}/builds/{build}/stream", s.authed(s.streamBuild))
}

type templateJSON struct {
	ID        string    `json:"templateId"`
	Names     []string  `json:"names"`
	Public    bool      `json:"public"`
	CPUCount  int       `json:"cpuCount"`
	MemoryMB  int       `json:"memoryMB"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Last is the template's newest build.
	Last *buildJSON `json:"lastBuild,omitempty"`
}

type buildJSON struct {
	ID        string          `json:"buildId"`
	Status    template.Status `json:"status"`
	Reason    string          `json:"reason,omitempty"`
	Step      string          `json:"step,omitempty"`
	Tags      []string        `json:"tags"`
	CreatedAt time.Time       `json:"createdAt"`
	UpdatedAt time.Time       `json:"updatedAt"`
	// Steps is how many steps the build has, and Done how many of them
	// its log says have run: its progress.
	Steps int `json:"steps"`
	Done  int `json:"done"`
}

func buildOut(b template.Build, logs []template.LogEntry) buildJSON {
	out := buildJSON{ID: b.ID, Status: b.Status, Tags: b.Tags, CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt, Steps: len(b.Spec.Steps)}
	if out.Tags == nil {
		out.Tags = []string{}
	}
	if b.Reason != nil {
		out.Reason, out.Step = b.Reason.Message, b.Reason.Step
	}
	seen := map[string]bool{}
	for _, e := range logs {
		if e.Step != "" && !seen[e.Step] {
			seen[e.Step] = true
		}
	}
	out.Done = min(len(seen), out.Steps)
	if b.Status == template.StatusReady {
		out.Done = out.Steps
	}
	return out
}

func (s *server) registry() (*template.Registry, error) {
	if s.cfg.Templates == nil {
		return nil, sandbox.Errorf(sandbox.KindUnavailable, "this server builds no templates")
	}
	return s.cfg.Templates, nil
}

func (s *server) listTemplates(w http.ResponseWriter, r *http.Request, team string) error {
	reg, err := s.registry()
	if err != nil {
		return err
	}
	ts, err := reg.Templates(r.Context(), team)
	if err != nil {
		return err
	}
	out := make([]templateJSON, 0, len(ts))
	for _, t := range ts {
		tj := templateJSON{ID: t.ID, Names: t.Names, Public: t.Public, CPUCount: t.CPUCount, MemoryMB: t.MemoryMB, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
		if tj.Names == nil {
			tj.Names = []string{}
		}
		if bs, err := reg.Builds(r.Context(), t.ID); err == nil && len(bs) > 0 {
			b := newest(bs)
			bj := buildOut(b, nil)
			tj.Last = &bj
		}
		out = append(out, tj)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func newest(bs []template.Build) template.Build {
	n := bs[0]
	for _, b := range bs[1:] {
		if b.CreatedAt.After(n.CreatedAt) {
			n = b
		}
	}
	return n
}

// listBuilds answers a template's builds, newest first; another team's
// template is not found.
func (s *server) listBuilds(w http.ResponseWriter, r *http.Request, team string) error {
	reg, err := s.registry()
	if err != nil {
		return err
	}
	t, err := reg.Template(r.Context(), team, r.PathValue("id"))
	if err != nil {
		return err
	}
	bs, err := reg.Builds(r.Context(), t.ID)
	if err != nil {
		return err
	}
	out := make([]buildJSON, 0, len(bs))
	for _, b := range bs {
		_, logs, err := reg.Status(r.Context(), team, t.ID, b.ID, 0, 0, "")
		if err != nil {
			return err
		}
		out = append(out, buildOut(b, logs))
	}
	for i := range out { // newest first
		for j := i + 1; j < len(out); j++ {
			if out[j].CreatedAt.After(out[i].CreatedAt) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type buildLogJSON struct {
	Time    time.Time `json:"timestamp"`
	Level   string    `json:"level"`
	Step    string    `json:"step,omitempty"`
	Message string    `json:"message"`
}

// streamBuild sends a build's log lines as they come ("logs" events) and
// its status and progress each time they change ("build" events), until
// the build ends.
func (s *server) streamBuild(w http.ResponseWriter, r *http.Request, team string) error {
	reg, err := s.registry()
	if err != nil {
		return err
	}
	tid, bid := r.PathValue("id"), r.PathValue("build")
	if _, _, err := reg.Status(r.Context(), team, tid, bid, 0, 1, ""); err != nil {
		return err
	}
	out := startSSE(w)
	offset := 0
	var prev []byte
	var all []template.LogEntry
	done := false
	err = s.poll(r, out, func() error {
		if done {
			<-r.Context().Done()
			return nil
		}
		b, entries, err := reg.Status(r.Context(), team, tid, bid, offset, 0, "")
		if err != nil {
			return nil
		}
		all = append(all, entries...)
		if len(entries) > 0 {
			offset += len(entries)
			batch := make([]buildLogJSON, 0, len(entries))
			for _, e := range entries {
				batch = append(batch, buildLogJSON{Time: e.Time, Level: e.Level, Step: e.Step, Message: e.Message})
			}
			data, _ := json.Marshal(batch)
			if err := out.send("logs", data); err != nil {
				return err
			}
		}
		data, _ := json.Marshal(buildOut(b, all))
		if !bytes.Equal(data, prev) {
			prev = data
			if err := out.send("build", data); err != nil {
				return err
			}
		}
		done = b.Status == template.StatusReady || b.Status == template.StatusError
		return nil
	})
	return err
}
