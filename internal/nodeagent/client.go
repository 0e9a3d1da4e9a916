package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Client calls node agents with the shared token.
type Client struct {
	token string
	http  *http.Client
}

// NewClient returns a client presenting token.
func NewClient(token string) *Client {
	return &Client{token: token, http: &http.Client{Timeout: 30 * time.Second}}
}

// Freeze freezes the pod uid through the agent at addr (host:port).
func (c *Client) Freeze(ctx context.Context, addr, uid string) error {
	return c.do(ctx, http.MethodPost, addr, uid, "freeze", nil, nil)
}

// Thaw thaws the pod uid.
func (c *Client) Thaw(ctx context.Context, addr, uid string) error {
	return c.do(ctx, http.MethodPost, addr, uid, "thaw", nil, nil)
}

// Frozen reports whether the pod uid is frozen.
func (c *Client) Frozen(ctx context.Context, addr, uid string) (bool, error) {
	var out struct {
		Frozen bool `json:"frozen"`
	}
	err := c.do(ctx, http.MethodGet, addr, uid, "frozen", nil, &out)
	return out.Frozen, err
}

// SetPidsLimit caps the processes of the pod uid.
func (c *Client) SetPidsLimit(ctx context.Context, addr, uid string, limit int) error {
	return c.do(ctx, http.MethodPut, addr, uid, "pids-limit", map[string]int{"limit": limit}, nil)
}

// Stats samples the pod uid's CPU and memory.
func (c *Client) Stats(ctx context.Context, addr, uid string) (Stats, error) {
	var s Stats
	err := c.do(ctx, http.MethodGet, addr, uid, "stats", nil, &s)
	return s, err
}

func (c *Client) do(ctx context.Context, method, addr, uid, op string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+"/v1/pods/"+uid+"/"+op, body)
	if err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "cannot call the node agent")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := c.http.Do(req)
	if err != nil {
		return sandbox.Wrap(sandbox.KindUnavailable, err, "the node agent of the sandbox's node is unreachable")
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		var e errorBody
		_ = json.NewDecoder(io.LimitReader(res.Body, 64<<10)).Decode(&e)
		kind := kindOf(res.StatusCode)
		if kind == sandbox.KindUnauthenticated || kind == sandbox.KindForbidden {
			// The control plane's token is wrong: the operator's to fix.
			kind = sandbox.KindInternal
		}
		return sandbox.Wrap(kind, fmt.Errorf("node agent %s %s: %d %s", addr, op, res.StatusCode, e.Message),
			"the node agent refused: "+e.Message)
	}
	if out != nil {
		if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(out); err != nil {
			return sandbox.Wrap(sandbox.KindInternal, err, "the node agent's answer is unreadable")
		}
	}
	return nil
}
