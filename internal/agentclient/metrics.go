package agentclient

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// agentMetrics is the agent's GET /metrics body (envd's snake_case names;
// sizes in bytes).
type agentMetrics struct {
	Timestamp  int64   `json:"ts"`
	CPUCount   int     `json:"cpu_count"`
	CPUUsedPct float64 `json:"cpu_used_pct"`
	MemTotal   int64   `json:"mem_total"`
	MemUsed    int64   `json:"mem_used"`
	MemCache   int64   `json:"mem_cache"`
	DiskUsed   int64   `json:"disk_used"`
	DiskTotal  int64   `json:"disk_total"`
}

// Metrics asks the agent at addr for the sandbox's resource use as seen
// from inside: its cgroup's CPU and memory, and its root filesystem
// (statfs of /), which the engine can only measure slowly. accessToken is
// the sandbox's envd token, "" when it has none.
func (c *Client) Metrics(ctx context.Context, addr, accessToken string) (sandbox.Stats, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return sandbox.Stats{}, err
	}
	if accessToken != "" {
		req.Header.Set("X-Access-Token", accessToken)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return sandbox.Stats{}, sandbox.Wrap(sandbox.KindUnavailable, err, "agent is not reachable")
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		return sandbox.Stats{}, sandbox.Wrap(sandbox.KindUnavailable, responseError(resp), "agent metrics failed")
	}
	var m agentMetrics
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return sandbox.Stats{}, sandbox.Wrap(sandbox.KindUnavailable, err, "agent metrics unreadable")
	}
	return sandbox.Stats{
		Time:       time.Unix(m.Timestamp, 0),
		CPUCount:   m.CPUCount,
		CPUUsedPct: m.CPUUsedPct,
		MemUsed:    m.MemUsed,
		MemTotal:   m.MemTotal,
		MemCache:   m.MemCache,
		DiskUsed:   m.DiskUsed,
		DiskTotal:  m.DiskTotal,
	}, nil
}
