package api

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Unix times from clients must convert to nanoseconds in an int64 (the
// store's unit, which ends in 2262): larger values would wrap around.
const (
	maxUnixSeconds = math.MaxInt64 / int64(time.Second)
	maxUnixMillis  = math.MaxInt64 / int64(time.Millisecond)
)

// unixParam parses an optional Unix time in seconds (or milliseconds when
// ms is set); zero when absent.
func unixParam(v, name string, ms bool) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	unit, limit := "seconds", maxUnixSeconds
	if ms {
		unit, limit = "milliseconds", maxUnixMillis
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > limit {
		return time.Time{}, sandbox.Errorf(sandbox.KindInvalid, "invalid %s '%s': must be a Unix time in %s from 0 to %d", name, v, unit, limit)
	}
	if ms {
		return time.UnixMilli(n), nil
	}
	return time.Unix(n, 0), nil
}

func (s *server) metrics(w http.ResponseWriter, r *http.Request, team string) error {
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	from, err := unixParam(q.Get("start"), "start", false)
	if err != nil {
		return err
	}
	to, err := unixParam(q.Get("end"), "end", false)
	if err != nil {
		return err
	}
	if !from.IsZero() && !to.IsZero() && from.After(to) {
		return sandbox.Errorf(sandbox.KindInvalid, "start (%d) is after end (%d)", from.Unix(), to.Unix())
	}
	samples, err := s.m.Metrics(r.Context(), team, id, from, to)
	if err != nil {
		return err
	}
	out := make([]metricJSON, 0, len(samples))
	for _, st := range samples {
		out = append(out, metricOut(st))
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

// maxBulkMetrics is the most sandboxes one bulk metrics call may name.
const maxBulkMetrics = 100

func (s *server) bulkMetrics(w http.ResponseWriter, r *http.Request, team string) error {
	var ids []string
	for _, v := range r.URL.Query()["sandbox_ids"] {
		for raw := range strings.SplitSeq(v, ",") {
			id, err := sandbox.ParseID(raw)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
	}
	if len(ids) > maxBulkMetrics {
		return sandbox.Errorf(sandbox.KindInvalid, "at most %d sandbox IDs", maxBulkMetrics)
	}
	latest, err := s.m.LatestMetrics(r.Context(), team, ids)
	if err != nil {
		return err
	}
	out := map[string]metricJSON{}
	for id, st := range latest {
		out[id] = metricOut(st)
	}
	httpedge.WriteJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
	return nil
}

// logsV1 answers the CLI's log call: entries from start (ms), at most
// limit (default 1000), as plain lines and as entries.
func (s *server) logsV1(w http.ResponseWriter, r *http.Request, team string) error {
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	since, err := unixParam(q.Get("start"), "start", true)
	if err != nil {
		return err
	}
	limit, err := intParam(q.Get("limit"), 1000, 0, 1<<20, "limit")
	if err != nil {
		return err
	}
	entries, err := s.m.Logs(r.Context(), team, id, sandbox.LogQuery{Since: since, Limit: limit})
	if err != nil {
		return err
	}
	type line struct {
		Timestamp time.Time `json:"timestamp"`
		Line      string    `json:"line"`
	}
	out := struct {
		Logs       []line         `json:"logs"`
		LogEntries []logEntryJSON `json:"logEntries"`
	}{Logs: []line{}, LogEntries: []logEntryJSON{}}
	for _, e := range entries {
		out.Logs = append(out.Logs, line{e.Time.UTC(), logLineV1(e)})
		out.LogEntries = append(out.LogEntries, logOut(e))
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

// logsV2 pages from cursor (ms) forward or backward, filtered by minimum
// level and a substring search.
func (s *server) logsV2(w http.ResponseWriter, r *http.Request, team string) error {
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	cursor, err := unixParam(q.Get("cursor"), "cursor", true)
	if err != nil {
		return err
	}
	limit, err := intParam(q.Get("limit"), 1000, 0, 1000, "limit")
	if err != nil {
		return err
	}
	lq := sandbox.LogQuery{Since: cursor}
	switch q.Get("direction") {
	case "", "forward":
	case "backward":
		lq = sandbox.LogQuery{Until: cursor, Backward: true}
	default:
		return sandbox.Errorf(sandbox.KindInvalid, "invalid direction '%s'", q.Get("direction"))
	}
	minLevel, ok := sandbox.LogLevelRank(q.Get("level"))
	if q.Get("level") != "" && !ok {
		return sandbox.Errorf(sandbox.KindInvalid, "invalid level '%s'", q.Get("level"))
	}
	search := q.Get("search")
	entries, err := s.m.Logs(r.Context(), team, id, lq)
	if err != nil {
		return err
	}
	out := []logEntryJSON{}
	for _, e := range entries {
		if len(out) == limit {
			break
		}
		if rank, _ := sandbox.LogLevelRank(e.Level); rank < minLevel || (search != "" && !strings.Contains(e.Message, search)) {
			continue
		}
		out = append(out, logOut(e))
	}
	httpedge.WriteJSON(w, http.StatusOK, map[string]any{"logs": out})
	return nil
}
