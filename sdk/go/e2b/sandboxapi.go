package e2b

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The control-plane calls on sandboxes, by ID. A *Sandbox offers the same on itself.

// SandboxState is the state of a sandbox the control plane reports.
type SandboxState string

// The states of a sandbox.
const (
	StateRunning SandboxState = "running"
	StatePaused  SandboxState = "paused"
)

// SandboxInfo describes a sandbox as the control plane knows it.
type SandboxInfo struct {
	SandboxID   string            `json:"sandboxID"`
	TemplateID  string            `json:"templateID"`
	Name        string            `json:"alias,omitempty"` // the template's alias
	Metadata    map[string]string `json:"metadata,omitempty"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	State       SandboxState      `json:"state"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	DiskSizeMB  int               `json:"diskSizeMB"`
	EnvdVersion string            `json:"envdVersion"`
	// AllowInternetAccess, Network, Lifecycle and Domain are only in GetInfo's answer.
	AllowInternetAccess *bool          `json:"allowInternetAccess,omitempty"`
	Network             *NetworkInfo   `json:"network,omitempty"`
	Lifecycle           *LifecycleInfo `json:"lifecycle,omitempty"`
	VolumeMounts        []VolumeMount  `json:"volumeMounts,omitempty"`
	Domain              string         `json:"domain,omitempty"`
}

// LifecycleInfo is what a sandbox does at its timeout.
type LifecycleInfo struct {
	OnTimeout  string `json:"onTimeout"` // "kill" or "pause"
	AutoResume bool   `json:"autoResume"`
}

// VolumeMount mounts the volume Name at Path in the sandbox.
type VolumeMount struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// SandboxMetrics is one sample of a sandbox's resource use.
type SandboxMetrics struct {
	Timestamp  time.Time `json:"timestamp"`
	CPUUsedPct float64   `json:"cpuUsedPct"`
	CPUCount   int       `json:"cpuCount"`
	MemUsed    int64     `json:"memUsed"`
	MemTotal   int64     `json:"memTotal"`
	MemCache   int64     `json:"memCache"`
	DiskUsed   int64     `json:"diskUsed"`
	DiskTotal  int64     `json:"diskTotal"`
}

// MetricsOptions bounds the samples GetMetrics returns; zero times mean no bound.
type MetricsOptions struct {
	Start, End time.Time
}

// PauseOptions configures a pause.
type PauseOptions struct {
	// KeepMemory, when set, chooses between a pause that keeps memory (true) and one that
	// keeps only the filesystem (false); nil leaves it to the server (memory kept).
	KeepMemory *bool
}

func sandboxPath(id string, rest string) string {
	return "/sandboxes/" + url.PathEscape(id) + rest
}

// Kill kills a sandbox, running or paused. It returns false when there was no such sandbox.
func (c *Client) Kill(ctx context.Context, sandboxID string) (bool, error) {
	if c.cfg.Debug {
		return true, nil
	}
	r, err := c.call(ctx, http.MethodDelete, sandboxPath(sandboxID, ""), nil, nil)
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

// GetInfo returns what the control plane knows about a sandbox.
func (c *Client) GetInfo(ctx context.Context, sandboxID string) (*SandboxInfo, error) {
	r, err := c.call(ctx, http.MethodGet, sandboxPath(sandboxID, ""), nil, nil)
	if err != nil {
		return nil, err
	}
	if err := notFound(r, sandboxID); err != nil {
		return nil, err
	}
	var info SandboxInfo
	return &info, r.decode(&info)
}

// SetTimeout makes a running sandbox end timeout from now; it may shorten its life.
func (c *Client) SetTimeout(ctx context.Context, sandboxID string, timeout time.Duration) error {
	if c.cfg.Debug {
		return nil
	}
	r, err := c.call(ctx, http.MethodPost, sandboxPath(sandboxID, "/timeout"), nil, map[string]int{"timeout": seconds(timeout)})
	if err != nil {
		return err
	}
	return notFound(r, sandboxID)
}

// Pause pauses a running sandbox. It returns false when the sandbox was already paused.
func (c *Client) Pause(ctx context.Context, sandboxID string, opts PauseOptions) (bool, error) {
	body := map[string]any{}
	if opts.KeepMemory != nil {
		body["memory"] = *opts.KeepMemory
	}
	r, err := c.call(ctx, http.MethodPost, sandboxPath(sandboxID, "/pause"), nil, body)
	if err != nil {
		return false, err
	}
	if r.code() == http.StatusConflict {
		return false, nil
	}
	return true, notFound(r, sandboxID)
}

// GetMetrics returns samples of a sandbox's resource use.
func (c *Client) GetMetrics(ctx context.Context, sandboxID string, opts MetricsOptions) ([]SandboxMetrics, error) {
	if c.cfg.Debug {
		return nil, nil
	}
	q := url.Values{}
	if !opts.Start.IsZero() {
		q.Set("start", strconv.FormatInt(opts.Start.Unix(), 10))
	}
	if !opts.End.IsZero() {
		q.Set("end", strconv.FormatInt(opts.End.Unix(), 10))
	}
	r, err := c.call(ctx, http.MethodGet, sandboxPath(sandboxID, "/metrics"), q, nil)
	if err != nil {
		return nil, err
	}
	if err := notFound(r, sandboxID); err != nil {
		return nil, err
	}
	var m []SandboxMetrics
	return m, r.decode(&m)
}

// UpdateNetwork replaces a running sandbox's egress rules; fields left out are cleared.
func (c *Client) UpdateNetwork(ctx context.Context, sandboxID string, update NetworkUpdate) error {
	if update.Rules != nil {
		rules, err := resolveRules(update.Rules, nil)
		if err != nil {
			return err
		}
		update.Rules = rules
	}
	r, err := c.call(ctx, http.MethodPut, sandboxPath(sandboxID, "/network"), nil, update)
	if err != nil {
		return err
	}
	return notFound(r, sandboxID)
}

// notFound maps a failed response, a 404 to *SandboxNotFoundError; nil when r succeeded.
func notFound(r *apiResponse, sandboxID string) error {
	if r.ok() {
		return nil
	}
	if r.code() == http.StatusNotFound {
		return &SandboxNotFoundError{NotFoundError{sandboxErr(http.StatusNotFound, "Sandbox "+sandboxID+" not found", nil)}}
	}
	return r.err()
}
