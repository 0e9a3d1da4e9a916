package api

import (
	"net/http"
	"time"

	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/sandbox"
)

// sandboxRequest returns the request's {id} and decodes its optional
// JSON body into req, checking the id first.
func sandboxRequest(r *http.Request, req any) (string, error) {
	id, err := sandboxID(r)
	if err != nil {
		return "", err
	}
	return id, decode(r, req)
}

func (s *server) setTimeout(w http.ResponseWriter, r *http.Request, team string) error {
	var req struct {
		Timeout *int64 `json:"timeout"`
	}
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	if err := decodeRequired(r, &req, `{"timeout": 60}`); err != nil {
		return err
	}
	if req.Timeout == nil {
		return sandbox.Errorf(sandbox.KindInvalid, "timeout is required")
	}
	if err := s.m.SetTimeout(r.Context(), team, id, seconds(*req.Timeout)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// maxRefresh is the longest refresh E2B accepts.
const maxRefresh = 3600

func (s *server) refresh(w http.ResponseWriter, r *http.Request, team string) error {
	var req struct {
		Duration *int64 `json:"duration"`
	}
	id, err := sandboxRequest(r, &req)
	if err != nil {
		return err
	}
	d := timeoutOr(req.Duration, 15*time.Second)
	if d > maxRefresh*time.Second {
		return sandbox.Errorf(sandbox.KindInvalid, "duration cannot be greater than %d seconds", maxRefresh)
	}
	if err := s.m.Refresh(r.Context(), team, id, d); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pause keeps memory (frozen) unless the body says memory: false.
func (s *server) pause(w http.ResponseWriter, r *http.Request, team string) error {
	var req struct {
		Memory *bool `json:"memory"`
	}
	id, err := sandboxRequest(r, &req)
	if err != nil {
		return err
	}
	keep := req.Memory == nil || *req.Memory
	if err := s.m.Pause(r.Context(), team, id, keep); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// stop is Warren's own: it moves a running or frozen sandbox to disk,
// freeing its memory (checkpointed under gVisor, else stopped), and
// answers with the mode it is paused in.
func (s *server) stop(w http.ResponseWriter, r *http.Request, team string) error {
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	mode, err := s.m.Stop(r.Context(), team, id)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusOK, map[string]string{"sandboxID": id, "pauseMode": string(mode)})
	return nil
}

// resume is E2B's deprecated resume (SDK 2.0–2.5): 409 when running.
// memory: false reboots on the filesystem, as connect's does; autoPause,
// when given, replaces the sandbox's action on timeout, as on E2B.
func (s *server) resume(w http.ResponseWriter, r *http.Request, team string) error {
	var req struct {
		Timeout   *int64 `json:"timeout"`
		AutoPause *bool  `json:"autoPause"`
		Memory    *bool  `json:"memory"`
	}
	id, err := sandboxRequest(r, &req)
	if err != nil {
		return err
	}
	opts := lifecycle.ResumeOptions{Reboot: req.Memory != nil && !*req.Memory, AutoPause: req.AutoPause}
	sb, err := s.m.Resume(r.Context(), team, id, timeoutOr(req.Timeout, 15*time.Second), opts)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusCreated, s.sandboxJSON(sb))
	return nil
}

func (s *server) connectV1(w http.ResponseWriter, r *http.Request, team string) error {
	return s.connect(w, r, team, false)
}

func (s *server) connectV2(w http.ResponseWriter, r *http.Request, team string) error {
	return s.connect(w, r, team, true)
}

// connect answers 200 when the sandbox was running and 201 when it had to
// be resumed. v1 requires a timeout; v2 defaults it to 300 s. memory:
// false reboots a paused sandbox on its filesystem instead of bringing
// back its memory and processes.
func (s *server) connect(w http.ResponseWriter, r *http.Request, team string, v2 bool) error {
	var req struct {
		Timeout *int64 `json:"timeout"`
		Memory  *bool  `json:"memory"`
	}
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	if v2 {
		err = decode(r, &req)
	} else {
		err = decodeRequired(r, &req, `{"timeout": 300}`)
	}
	if err != nil {
		return err
	}
	if !v2 && req.Timeout == nil {
		return sandbox.Errorf(sandbox.KindInvalid, "timeout is required")
	}
	keep := req.Memory == nil || *req.Memory
	sb, resumed, err := s.m.Connect(r.Context(), team, id, timeoutOr(req.Timeout, 300*time.Second), keep)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if resumed {
		status = http.StatusCreated
	}
	httpedge.WriteJSON(w, status, s.sandboxJSON(sb))
	return nil
}

// updateNetwork replaces a sandbox's egress settings; omitted fields are
// cleared. The manager enforces them on the running sandbox at once.
func (s *server) updateNetwork(w http.ResponseWriter, r *http.Request, team string) error {
	var req networkJSON
	id, err := sandboxRequest(r, &req)
	if err != nil {
		return err
	}
	if err := req.validateUpdate(); err != nil {
		return err
	}
	sb, err := s.m.Get(r.Context(), team, id)
	if err != nil {
		return err
	}
	network := networkIn(&req, nil)
	if err := s.networkRules(r.Context(), team, &network, sb.IAM); err != nil {
		return err
	}
	if err := s.m.UpdateNetwork(r.Context(), team, id, network); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
