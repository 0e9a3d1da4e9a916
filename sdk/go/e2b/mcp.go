package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
)

const (
	mcpPort      = 50005
	mcpTokenPath = "/etc/mcp-gateway/.token"
)

// mcpState is the MCP gateway's token, once known.
type mcpState struct {
	mu    sync.Mutex
	token string
}

// startMCP starts the sandbox's MCP gateway with config and a fresh access token.
func (s *Sandbox) startMCP(ctx context.Context, config map[string]any) error {
	raw, err := json.Marshal(config)
	if err != nil {
		return invalidArg("MCP configuration: %v", err)
	}
	token := make([]byte, 16)
	rand.Read(token)
	s.mcp.token = hex.EncodeToString(token)
	_, err = s.Commands.Run(ctx, "mcp-gateway --config "+shellQuote(string(raw)), CommandOptions{
		User: "root",
		Envs: map[string]string{"GATEWAY_ACCESS_TOKEN": s.mcp.token},
	})
	var exit *CommandExitError
	if errors.As(err, &exit) {
		return &SandboxError{Message: "Failed to start MCP gateway: " + exit.Result.Stderr, Err: err}
	}
	return err
}

// MCPURL is the URL of the sandbox's MCP gateway.
func (s *Sandbox) MCPURL() string { return "https://" + s.Host(mcpPort) + "/mcp" }

// MCPToken is the bearer token of the sandbox's MCP gateway: the one Create chose, or the one
// the gateway keeps in the sandbox (read as root).
func (s *Sandbox) MCPToken(ctx context.Context) (string, error) {
	s.mcp.mu.Lock()
	defer s.mcp.mu.Unlock()
	if s.mcp.token == "" {
		b, err := s.Files.Read(ctx, mcpTokenPath, ReadOptions{User: "root"})
		if err != nil {
			return "", err
		}
		s.mcp.token = string(b)
	}
	return s.mcp.token, nil
}
