package codeinterp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// envsClient fetches the sandbox-wide env vars from the agent's GET /envs.
type envsClient struct {
	url  string // "" disables fetching
	http *http.Client
}

func newEnvsClient(agentURL string) *envsClient {
	c := &envsClient{http: &http.Client{Timeout: 5 * time.Second}}
	if agentURL != "" {
		c.url = agentURL + "/envs"
	}
	return c
}

// fetch returns the env vars, authenticating with token when it is set.
func (c *envsClient) fetch(ctx context.Context, token string) (map[string]string, error) {
	if c.url == "" {
		return nil, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("X-Access-Token", token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("GET %s: %s", c.url, resp.Status)
	}
	var vars map[string]string
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBodyBytes)).Decode(&vars); err != nil {
		return nil, fmt.Errorf("GET %s: %w", c.url, err)
	}
	for name := range vars {
		if !validEnvName(name) {
			delete(vars, name) // cannot be set safely in every language
		}
	}
	return vars, nil
}
