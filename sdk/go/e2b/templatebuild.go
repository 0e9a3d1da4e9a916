package e2b

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// BuildOptions configures a template build.
type BuildOptions struct {
	// Tags are given to the build besides the name's own (name:tag).
	Tags []string
	// CPUCount and MemoryMB are the sandboxes' defaults; 0 means 2 CPUs and 1024 MB.
	CPUCount, MemoryMB int
	// SkipCache rebuilds every layer.
	SkipCache bool
	// OnLog receives the build's log as it is polled, in order.
	OnLog func(BuildLogEntry)
	// PollInterval is the time between two polls of the build's status; 0 means 200 ms.
	PollInterval time.Duration
}

// BuildInfo names a build.
type BuildInfo struct {
	TemplateID string   `json:"templateID"`
	BuildID    string   `json:"buildID"`
	Names      []string `json:"names"`
	Tags       []string `json:"tags"`
}

// BuildLogEntry is one line of a build's log.
type BuildLogEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"`
	Message   string    `json:"message"`
	Step      string    `json:"step,omitempty"`
}

// BuildStatus is a build's state and a page of its log.
type BuildStatus struct {
	TemplateID string          `json:"templateID"`
	BuildID    string          `json:"buildID"`
	Status     string          `json:"status"` // building, waiting, ready or error
	LogEntries []BuildLogEntry `json:"logEntries"`
	Reason     *struct {
		Message string `json:"message"`
		Step    string `json:"step,omitempty"`
	} `json:"reason,omitempty"`
}

// TemplateTag is a tag of a template and the build it points at.
type TemplateTag struct {
	Tag       string    `json:"tag"`
	BuildID   string    `json:"buildID"`
	CreatedAt time.Time `json:"createdAt"`
}

// TemplateTagInfo is what AssignTemplateTags did.
type TemplateTagInfo struct {
	BuildID string   `json:"buildID"`
	Tags    []string `json:"tags"`
}

// BuildTemplate builds t as name (which may carry a :tag) and waits for the build to end;
// a failed build is a *BuildError.
func (c *Client) BuildTemplate(ctx context.Context, t *Template, name string, opts BuildOptions) (*BuildInfo, error) {
	info, err := c.BuildTemplateInBackground(ctx, t, name, opts)
	if err != nil {
		return nil, err
	}
	return info, c.waitForBuild(ctx, info, opts)
}

// BuildTemplateInBackground starts building t as name and returns at once; follow the build
// with GetBuildStatus.
func (c *Client) BuildTemplateInBackground(ctx context.Context, t *Template, name string, opts BuildOptions) (*BuildInfo, error) {
	if t.err != nil {
		return nil, t.err
	}
	req := map[string]any{"name": name, "cpuCount": or0(opts.CPUCount, 2), "memoryMB": or0(opts.MemoryMB, 1024)}
	if len(opts.Tags) > 0 {
		req["tags"] = opts.Tags
	}
	var info BuildInfo
	if err := c.buildCall(ctx, http.MethodPost, "/v3/templates", nil, req, &info); err != nil {
		return nil, err
	}
	if err := c.uploadCopies(ctx, t, info.TemplateID); err != nil {
		return nil, err
	}
	start := "/v2/templates/" + url.PathEscape(info.TemplateID) + "/builds/" + url.PathEscape(info.BuildID)
	if err := c.buildCall(ctx, http.MethodPost, start, nil, t.buildBody(opts.SkipCache), nil); err != nil {
		return nil, err
	}
	return &info, nil
}

// GetBuildStatus returns a build's status and its log from the entry logsOffset on.
func (c *Client) GetBuildStatus(ctx context.Context, templateID, buildID string, logsOffset int) (*BuildStatus, error) {
	q := url.Values{"logsOffset": {strconv.Itoa(logsOffset)}}
	var st BuildStatus
	path := "/templates/" + url.PathEscape(templateID) + "/builds/" + url.PathEscape(buildID) + "/status"
	return &st, c.buildCall(ctx, http.MethodGet, path, q, nil, &st)
}

// waitForBuild polls a build until it ends, handing its log to opts.OnLog; after the end it
// drains the log, which comes at most 100 entries a poll.
func (c *Client) waitForBuild(ctx context.Context, info *BuildInfo, opts BuildOptions) error {
	interval := opts.PollInterval
	if interval == 0 {
		interval = 200 * time.Millisecond
	}
	offset := 0
	poll := func() (*BuildStatus, error) {
		st, err := c.GetBuildStatus(ctx, info.TemplateID, info.BuildID, offset)
		if err != nil {
			return nil, err
		}
		offset += len(st.LogEntries)
		if opts.OnLog != nil {
			for _, e := range st.LogEntries {
				opts.OnLog(e)
			}
		}
		return st, nil
	}
	for {
		st, err := poll()
		if err != nil {
			return err
		}
		switch st.Status {
		case "ready", "error":
			for tail := st; len(tail.LogEntries) > 0; {
				if tail, err = poll(); err != nil {
					return err
				}
			}
			if st.Status == "ready" {
				return nil
			}
			be := &BuildError{Message: "Unknown error"}
			if st.Reason != nil {
				be.Message, be.Step = st.Reason.Message, st.Reason.Step
			}
			return be
		}
		if err := sleepCtx(ctx, interval); err != nil {
			return transportError(ctx, err)
		}
	}
}

// TemplateExists says whether a template of this name exists (also when it belongs to
// another team).
func (c *Client) TemplateExists(ctx context.Context, name string) (bool, error) {
	r, err := c.call(ctx, http.MethodGet, "/templates/aliases/"+url.PathEscape(name), nil, nil)
	if err != nil {
		return false, err
	}
	switch r.status {
	case http.StatusNotFound:
		return false, nil
	case http.StatusForbidden:
		return true, nil
	}
	return r.ok(), templateError(r)
}

// AssignTemplateTags tags the build that target (name:tag) points at.
func (c *Client) AssignTemplateTags(ctx context.Context, target string, tags ...string) (*TemplateTagInfo, error) {
	var info TemplateTagInfo
	r, err := c.call(ctx, http.MethodPost, "/templates/tags", nil, map[string]any{"target": target, "tags": tags})
	if err != nil {
		return nil, err
	}
	if err := templateError(r); err != nil {
		return nil, err
	}
	return &info, r.decode(&info)
}

// RemoveTemplateTags removes tags from a template.
func (c *Client) RemoveTemplateTags(ctx context.Context, name string, tags ...string) error {
	r, err := c.call(ctx, http.MethodDelete, "/templates/tags", nil, map[string]any{"name": name, "tags": tags})
	if err != nil {
		return err
	}
	return templateError(r)
}

// GetTemplateTags lists a template's tags.
func (c *Client) GetTemplateTags(ctx context.Context, templateID string) ([]TemplateTag, error) {
	r, err := c.call(ctx, http.MethodGet, "/templates/"+url.PathEscape(templateID)+"/tags", nil, nil)
	if err != nil {
		return nil, err
	}
	if err := templateError(r); err != nil {
		return nil, err
	}
	var tags []TemplateTag
	return tags, r.decode(&tags)
}

// buildCall makes one call of the build API; failures are *BuildError (but for 401, 429, 503).
func (c *Client) buildCall(ctx context.Context, method, path string, q url.Values, in, out any) error {
	r, err := c.call(ctx, method, path, q, in)
	if err != nil {
		return err
	}
	if r.ok() {
		return r.decode(out)
	}
	switch r.status {
	case http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return r.err()
	}
	return &BuildError{Message: fmt.Sprintf("%d: %s", r.status, r.message()), StatusCode: r.status}
}

// templateError maps a failed response of the template API to *TemplateError; nil when r
// succeeded.
func templateError(r *apiResponse) error {
	switch {
	case r.ok():
		return nil
	case r.status == http.StatusUnauthorized || r.status == http.StatusTooManyRequests || r.status == http.StatusServiceUnavailable:
		return r.err()
	}
	return &TemplateError{sandboxErr(r.status, fmt.Sprintf("%d: %s", r.status, r.message()), nil)}
}

func or0(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// buildLevels orders the levels of build log entries.
var buildLevels = map[string]int{"debug": 0, "info": 1, "warn": 2, "error": 3}

// DefaultBuildLogger is a BuildOptions.OnLog that writes each entry at minLevel ("debug",
// "info", "warn" or "error"; "" is "info") or above to w as a line: the seconds since the
// logger was made, the entry's time, its level and its message (the JS SDK's
// defaultBuildLogger, without colours). An entry of an unknown level counts as info.
func DefaultBuildLogger(w io.Writer, minLevel string) func(BuildLogEntry) {
	start := time.Now()
	floor, ok := buildLevels[minLevel]
	if !ok {
		floor = buildLevels["info"]
	}
	return func(e BuildLogEntry) {
		level, ok := buildLevels[e.Level]
		if !ok {
			level, e.Level = buildLevels["info"], "info"
		}
		if level < floor {
			return
		}
		fmt.Fprintf(w, "%-5s | %s %-5s %s\n", fmt.Sprintf("%.1fs", time.Since(start).Seconds()),
			e.Timestamp.Local().Format(time.TimeOnly), strings.ToUpper(e.Level), e.Message)
	}
}
