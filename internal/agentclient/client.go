// Package agentclient is the Warren server's side of the agent inside a
// sandbox: it waits for a fresh agent to answer, configures it with
// POST /init, probes its health and opens tunnels to ports inside the
// sandbox. It speaks to the agent's published port on 127.0.0.1 only; what
// to do with a sandbox whose agent fails is the lifecycle manager's call.
package agentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/warrenhq/warren/internal/agent/state"
	"github.com/warrenhq/warren/internal/phases"
	"github.com/warrenhq/warren/internal/sandbox"
)

// EnvdVersion is the envd version of the agent this server runs in its
// sandboxes (the agent's own, agent/state.Version), which the API tells
// clients: the SDKs unlock features by it.
const EnvdVersion = state.Version

// Health polling backoff: a container's agent is up within milliseconds
// of the container starting (10–30 ms on a loaded 2-core machine), and
// that moment is on the critical path of creating a sandbox, so retries
// come fast and stay close: a probe is one connection to the published
// port, and at most a few creates poll at a time (the warm pool's gate).
// With the interval doubling to 50 ms an agent up at 31 ms was seen at
// 62 ms.
const (
	pollFirst = 2 * time.Millisecond
	pollMax   = 10 * time.Millisecond
	// attemptTimeout bounds one probe so a connection that hangs (a
	// frozen container, a half-open published port) cannot stall polling.
	attemptTimeout = time.Second
)

// Client talks to agents. The zero value is not usable; call New. It is
// safe for concurrent use and keeps connections to agents alive between
// calls.
type Client struct {
	http *http.Client
}

var _ sandbox.Agent = (*Client)(nil)

// New returns a client with its own transport: no proxy (agents are on
// 127.0.0.1) and HTTP/1.1, which is all the agent endpoints need.
func New() *Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	return &Client{http: &http.Client{Transport: tr}}
}

// Health returns nil when the agent at addr answers GET /health with 204.
func (c *Client) Health(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return sandbox.Wrap(sandbox.KindUnavailable, err, "agent is not reachable")
	}
	drain(resp)
	if resp.StatusCode != http.StatusNoContent {
		return sandbox.Errorf(sandbox.KindUnavailable, "agent health check answered %s", resp.Status)
	}
	return nil
}

// Init waits until the agent at addr is healthy, unless init.Answered,
// then configures it. The token goes in the body (to set it the first
// time) and in X-Access-Token (to prove it when the agent already has
// one, e.g. after a retry).
func (c *Client) Init(ctx context.Context, addr string, init sandbox.AgentInit) error {
	if !init.Answered {
		if err := c.WaitReady(ctx, addr); err != nil {
			return err
		}
		phases.Mark(ctx, "agent_wait")
	}
	ib := initBody{
		EnvVars:        init.EnvVars,
		AccessToken:    init.AccessToken,
		Timestamp:      time.Now().UTC(),
		DefaultUser:    init.DefaultUser,
		DefaultWorkdir: init.DefaultWorkdir,
		CABundle:       init.CABundle,
	}
	// An agent restored from another sandbox's memory is told its own
	// secret and token, proving the ones it holds.
	secret, token := init.AgentSecret, init.AccessToken
	if init.Restored != (sandbox.AgentIdentity{}) {
		secret, token = init.Restored.AgentSecret, init.Restored.AccessToken
		ib.AgentSecret = init.AgentSecret
	}
	body, err := json.Marshal(ib)
	if err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "encoding agent init")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/init", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set(secretHeader, secret)
	}
	if token != "" {
		req.Header.Set("X-Access-Token", token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return sandbox.Wrap(sandbox.KindUnavailable, err, "agent init failed")
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusNoContent {
		return sandbox.Wrap(sandbox.KindInternal, responseError(resp), "agent init failed")
	}
	phases.Mark(ctx, "agent_init")
	return nil
}

// initBody is the agent's POST /init body (envd's field names).
type initBody struct {
	EnvVars        map[string]string `json:"envVars,omitempty"`
	AccessToken    string            `json:"accessToken,omitempty"`
	Timestamp      time.Time         `json:"timestamp"`
	DefaultUser    string            `json:"defaultUser,omitempty"`
	DefaultWorkdir string            `json:"defaultWorkdir,omitempty"`
	CABundle       string            `json:"caBundle,omitempty"`
	AgentSecret    string            `json:"agentSecret,omitempty"` // Warren's own
}

// WaitReady polls the agent at addr until it answers GET /health.
func (c *Client) WaitReady(ctx context.Context, addr string) error {
	delay := pollFirst
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		attempt, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := c.Health(attempt, addr)
		cancel()
		if err == nil {
			return nil
		}
		timer.Reset(delay)
		select {
		case <-ctx.Done():
			return sandbox.Wrap(sandbox.KindUnavailable, errors.Join(ctx.Err(), err), "agent did not become ready")
		case <-timer.C:
		}
		delay = min(delay*2, pollMax)
	}
}

// responseError describes an agent's error response for the log: its
// status and the message of its JSON error body, when it has one.
func responseError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var body struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &body) == nil && body.Message != "" {
		return fmt.Errorf("agent answered %s: %s", resp.Status, body.Message)
	}
	return fmt.Errorf("agent answered %s: %s", resp.Status, bytes.TrimSpace(data))
}

// drain reads what is left of a body so the connection can be reused.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
