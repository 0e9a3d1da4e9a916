package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/sandbox"
)

// seconds converts a client's timeout in seconds, clamping absurd values
// so that the manager's bounds check sees them instead of an overflow.
func seconds(n int64) time.Duration {
	const limit = 1 << 32
	return time.Duration(min(max(n, -limit), limit)) * time.Second
}

// timeoutOr returns the timeout a client sent, or def when it sent none.
func timeoutOr(t *int64, def time.Duration) time.Duration {
	if t == nil {
		return def
	}
	return seconds(*t)
}

func (s *server) createV1(w http.ResponseWriter, r *http.Request, team string) error {
	return s.create(w, r, team, false)
}

func (s *server) createV2(w http.ResponseWriter, r *http.Request, team string) error {
	return s.create(w, r, team, true)
}

// create serves both create endpoints: v2 always issues an envd access
// token and defaults the timeout to 300 s; v1 issues one when secure is
// set and defaults to 15 s.
func (s *server) create(w http.ResponseWriter, r *http.Request, team string, v2 bool) error {
	var req newSandboxJSON
	var err error
	if v2 {
		err = decode(r, &req)
	} else {
		err = decodeRequired(r, &req, `{"templateID": "base"}`)
	}
	if err != nil {
		return err
	}
	if !v2 && req.TemplateID == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "templateID is required")
	}
	if err := req.validate(v2); err != nil {
		return err
	}
	def := 15 * time.Second
	if v2 {
		def = 300 * time.Second
	}
	lc := sandbox.Lifecycle{OnTimeout: sandbox.TimeoutKill, KeepMemory: true}
	if req.AutoPause != nil && *req.AutoPause {
		lc.OnTimeout = sandbox.TimeoutPause
	}
	if req.AutoPauseMemory != nil {
		lc.KeepMemory = *req.AutoPauseMemory
	}
	if req.AutoResume != nil {
		lc.AutoResume = req.AutoResume.Enabled
	}
	mounts, err := s.volumeMounts(r.Context(), team, req.VolumeMounts)
	if err != nil {
		return err
	}
	iam := iamIn(req.IAM)
	network := networkIn(req.Network, req.AllowInternetAccess)
	if err := s.networkRules(r.Context(), team, &network, iam); err != nil {
		return err
	}
	sb, err := s.m.Create(r.Context(), lifecycle.CreateRequest{
		VolumeMounts: mounts,
		TeamID:       team,
		Template:     req.TemplateID,
		Timeout:      timeoutOr(req.Timeout, def),
		Metadata:     req.Metadata,
		EnvVars:      req.EnvVars,
		Secure:       v2 || (req.Secure != nil && *req.Secure),
		Lifecycle:    lc,
		Network:      network,
		IAM:          iam,
	})
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusCreated, s.sandboxJSON(sb))
	return nil
}

func (s *server) get(w http.ResponseWriter, r *http.Request, team string) error {
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	sb, err := s.m.Get(r.Context(), team, id)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusOK, s.detailJSON(sb))
	return nil
}

// listV1 lists running sandboxes, unpaged (the CLI's list).
func (s *server) listV1(w http.ResponseWriter, r *http.Request, team string) error {
	md, err := parseMetadataQuery(r.URL.Query().Get("metadata"))
	if err != nil {
		return err
	}
	sbs, _, err := s.m.List(r.Context(), lifecycle.ListRequest{
		TeamID: team, States: []sandbox.State{sandbox.StateRunning}, Metadata: md,
	})
	if err != nil {
		return err
	}
	out := make([]listedSandboxJSON, 0, len(sbs))
	for _, sb := range sbs {
		out = append(out, s.listedJSON(sb))
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

// listV2 lists with filters and X-Next-Token paging.
func (s *server) listV2(w http.ResponseWriter, r *http.Request, team string) error {
	q := r.URL.Query()
	req := lifecycle.ListRequest{TeamID: team, Template: q.Get("template"), NextToken: q.Get("nextToken"), Descending: true}
	var err error
	if req.Metadata, err = parseMetadataQuery(q.Get("metadata")); err != nil {
		return err
	}
	for _, v := range q["state"] {
		for st := range strings.SplitSeq(v, ",") {
			switch sandbox.State(st) {
			case sandbox.StateRunning, sandbox.StatePaused:
				req.States = append(req.States, sandbox.State(st))
			default:
				return sandbox.Errorf(sandbox.KindInvalid, "invalid state '%s'", st)
			}
		}
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		req.Descending = false
	default:
		return sandbox.Errorf(sandbox.KindInvalid, "invalid order '%s'", q.Get("order"))
	}
	if v := q.Get("startedAfter"); v != "" {
		if req.StartedAfter, err = time.Parse(time.RFC3339, v); err != nil {
			return sandbox.Errorf(sandbox.KindInvalid, "invalid startedAfter '%s'", v)
		}
	}
	if req.Limit, err = intParam(q.Get("limit"), 100, 1, 100, "limit"); err != nil {
		return err
	}
	sbs, next, err := s.m.List(r.Context(), req)
	if err != nil {
		return err
	}
	out := make([]listedSandboxJSON, 0, len(sbs))
	for _, sb := range sbs {
		out = append(out, s.listedJSON(sb))
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

// intParam parses an optional integer query parameter within [lo, hi].
func intParam(v string, def, lo, hi int, name string) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, sandbox.Errorf(sandbox.KindInvalid, "%s must be an integer between %d and %d", name, lo, hi)
	}
	return n, nil
}
