package mcpgateway

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Where the gateway serves, and where its token is kept (E2B's SDK reads
// the token from there as root: Sandbox.getMcpToken()).
const (
	DefaultPort      = 50005
	Path             = "/mcp"
	DefaultTokenFile = "/etc/mcp-gateway/.token"
)

// Handler serves g's server as streamable HTTP at Path (POST for
// JSON-RPC, GET for the server's stream, DELETE to end a session), to
// requests that carry "Authorization: Bearer <token>".
func (g *Gateway) Handler(token string, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(Path, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, &mcp.StreamableHTTPOptions{
		Logger: log,
		// Requests come through Warren's proxy with the sandbox's host
		// name; the token, not the Host header, is what admits them.
		DisableLocalhostProtection: true,
	}))
	return RequireToken(token, mux)
}

// RequireToken admits requests whose Authorization header is "Bearer
// <token>" and answers the others 401.
func RequireToken(token string, next http.Handler) http.Handler {
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-gateway"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintln(w, `{"jsonrpc":"2.0","error":{"code":-32001,"message":"missing or wrong bearer token: send Authorization: Bearer <the gateway's token>"},"id":null}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Token is the gateway's access token: given (E2B's SDK passes one in
// GATEWAY_ACCESS_TOKEN) or generated; either way written to file, readable
// by root only, so a client that did not choose it can read it there.
func Token(given, file string) (string, error) {
	token := strings.TrimSpace(given)
	if token == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		token = hex.EncodeToString(b)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(token), 0o600); err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	return token, nil
}
