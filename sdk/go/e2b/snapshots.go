package e2b

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// SnapshotInfo describes a snapshot: a sandbox's state saved as a template, from which new
// sandboxes are created (SandboxOptions.Template = SnapshotID).
type SnapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

// SnapshotListOptions filters and pages ListSnapshots.
type SnapshotListOptions struct {
	SandboxID string // only the snapshots of this sandbox
	Name      string // only the snapshots of this name
	Limit     int
	NextToken string
}

// CreateSnapshot saves a sandbox's state as a snapshot, named when name is not "".
func (c *Client) CreateSnapshot(ctx context.Context, sandboxID, name string) (*SnapshotInfo, error) {
	body := map[string]string{}
	if name != "" {
		body["name"] = name
	}
	r, err := c.call(ctx, http.MethodPost, sandboxPath(sandboxID, "/snapshots"), nil, body)
	if err != nil {
		return nil, err
	}
	if err := notFound(r, sandboxID); err != nil {
		return nil, err
	}
	var s SnapshotInfo
	return &s, r.decode(&s)
}

// ListSnapshots lists the snapshots, page by page.
func (c *Client) ListSnapshots(opts SnapshotListOptions) *Paginator[SnapshotInfo] {
	q := url.Values{}
	if opts.SandboxID != "" {
		q.Set("sandboxID", opts.SandboxID)
	}
	if opts.Name != "" {
		q.Set("name", opts.Name)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	return &Paginator[SnapshotInfo]{token: opts.NextToken, next: func(ctx context.Context, token string) ([]SnapshotInfo, string, error) {
		var out []SnapshotInfo
		next, err := c.page(ctx, "/snapshots", q, token, &out)
		return out, next, err
	}}
}

// DeleteSnapshot deletes a snapshot; false when there was no such snapshot.
func (c *Client) DeleteSnapshot(ctx context.Context, snapshotID string) (bool, error) {
	r, err := c.call(ctx, http.MethodDelete, "/templates/"+url.PathEscape(snapshotID), nil, nil)
	if err != nil {
		return false, err
	}
	if r.code() == http.StatusNotFound {
		return false, nil
	}
	if !r.ok() {
		return false, r.err()
	}
	return true, nil
}

// ForkOptions configures Fork.
type ForkOptions struct {
	// Count is how many copies to make (1 to 100); 0 means 1.
	Count int
	// Timeout is the copies' life; 0 leaves the server's default.
	Timeout time.Duration
}

// ForkResult is one copy of a fork: a sandbox, or the error that prevented it.
type ForkResult struct {
	Sandbox *Sandbox
	Err     error
}

// Fork copies a running sandbox (its filesystem and, where the server can, its memory) into
// new independent sandboxes.
func (c *Client) Fork(ctx context.Context, sandboxID string, opts ForkOptions) ([]ForkResult, error) {
	if opts.Count < 0 || opts.Count > 100 {
		return nil, invalidArg("ForkOptions.Count must be between 1 and 100 (got %d)", opts.Count)
	}
	body := map[string]int{}
	if opts.Count > 0 {
		body["count"] = opts.Count
	}
	if opts.Timeout > 0 {
		body["timeout"] = seconds(opts.Timeout)
	}
	r, err := c.call(ctx, http.MethodPost, sandboxPath(sandboxID, "/fork"), nil, body)
	if err != nil {
		return nil, err
	}
	if err := notFound(r, sandboxID); err != nil {
		return nil, err
	}
	var raw []struct {
		Sandbox *sandboxResponse `json:"sandbox"`
		Error   *apiErrorBody    `json:"error"`
	}
	if err := r.decode(&raw); err != nil {
		return nil, err
	}
	out := make([]ForkResult, len(raw))
	for i, f := range raw {
		switch {
		case f.Sandbox != nil && f.Error == nil:
			out[i].Sandbox = c.newSandbox(*f.Sandbox)
		case f.Error == nil:
			out[i].Err = &SandboxError{Message: "Failed to start forked sandbox"}
		case f.Error.Code == http.StatusNotFound:
			out[i].Err = &NotFoundError{sandboxErr(f.Error.Code, strconv.Itoa(f.Error.Code)+": "+f.Error.Message, nil)}
		default:
			out[i].Err = errorFromCode(f.Error.Code, f.Error.Message)
		}
	}
	return out, nil
}

// CreateSnapshot saves the sandbox's state as a snapshot.
func (s *Sandbox) CreateSnapshot(ctx context.Context, name string) (*SnapshotInfo, error) {
	return s.client.CreateSnapshot(ctx, s.ID, name)
}

// ListSnapshots lists the sandbox's snapshots.
func (s *Sandbox) ListSnapshots(opts SnapshotListOptions) *Paginator[SnapshotInfo] {
	opts.SandboxID = s.ID
	return s.client.ListSnapshots(opts)
}

// Fork copies the sandbox.
func (s *Sandbox) Fork(ctx context.Context, opts ForkOptions) ([]ForkResult, error) {
	return s.client.Fork(ctx, s.ID, opts)
}
