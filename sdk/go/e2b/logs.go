package e2b

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// LogEntry is one line of a sandbox's log.
type LogEntry struct {
	Timestamp time.Time         `json:"timestamp"`
	Level     string            `json:"level"` // debug, info, warn or error
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields,omitempty"`
}

// LogsOptions selects log entries.
type LogsOptions struct {
	// Cursor starts the page at this time; zero: the start (forward) or now (backward).
	Cursor time.Time
	// Limit is the page size (at most 1000); 0 leaves the server's (1000).
	Limit int
	// Backward pages from Cursor back in time.
	Backward bool
	// Level is the least level kept: debug, info, warn or error; "" keeps all.
	Level string
	// Search keeps the entries whose message contains it.
	Search string
}

// GetLogs returns a page of a sandbox's log (the control plane's
// GET /v2/sandboxes/{id}/logs, which E2B's CLI reads; the JavaScript SDK has no counterpart).
func (c *Client) GetLogs(ctx context.Context, sandboxID string, opts LogsOptions) ([]LogEntry, error) {
	q := url.Values{}
	if !opts.Cursor.IsZero() {
		q.Set("cursor", strconv.FormatInt(opts.Cursor.UnixMilli(), 10))
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Backward {
		q.Set("direction", "backward")
	}
	if opts.Level != "" {
		q.Set("level", opts.Level)
	}
	if opts.Search != "" {
		q.Set("search", opts.Search)
	}
	r, err := c.call(ctx, http.MethodGet, "/v2"+sandboxPath(sandboxID, "/logs"), q, nil)
	if err != nil {
		return nil, err
	}
	if err := notFound(r, sandboxID); err != nil {
		return nil, err
	}
	var out struct {
		Logs []LogEntry `json:"logs"`
	}
	return out.Logs, r.decode(&out)
}

// GetLogs returns a page of the sandbox's log.
func (s *Sandbox) GetLogs(ctx context.Context, opts LogsOptions) ([]LogEntry, error) {
	return s.client.GetLogs(ctx, s.ID, opts)
}
