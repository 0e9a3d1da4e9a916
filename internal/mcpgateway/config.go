// Package mcpgateway is the MCP gateway that runs inside sandboxes of the
// mcp-gateway template: it starts the stdio MCP servers a sandbox's config
// names (E2B's `Sandbox.create({ mcp })`), and serves them together as one
// MCP endpoint over streamable HTTP, guarded by a bearer token.
//
// It owns the config's shape (catalog names and github/<owner>/<repo>
// entries), fetching and installing servers (git clone, installCmd, the
// catalog's npm and Python packages), the stdio clients and the
// aggregated server (tools and prompts prefixed by their server's name,
// calls routed to the server that owns them). It does not daemonize or
// read flags: cmd/mcp-gateway does.
package mcpgateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// GitHubPrefix starts the config keys of servers fetched from a git
// repository: github/<owner>/<repo>.
const GitHubPrefix = "github/"

// Server is one MCP server of a config, resolved to what starts it.
type Server struct {
	// Key is the config's key: a catalog name or github/<owner>/<repo>.
	Key string
	// Prefix starts the names of its tools and prompts on the gateway:
	// "<Prefix>__<name>". Unique within a config.
	Prefix string
	// Repo is "<owner>/<repo>" for a github entry; "" for a catalog one.
	Repo string
	// InstallCmd runs once, in the clone's root, before RunCmd; "" = none.
	InstallCmd string
	// RunCmd starts the stdio server (a bash command line) for a github
	// entry. Catalog entries set Catalog instead.
	RunCmd string
	// Catalog is the catalog entry of a catalog name; nil for github.
	Catalog *CatalogEntry
	// Args are the catalog server's arguments, from its parameters.
	Args []string
	// Env is added to the server's environment (the entry's envs, or the
	// catalog's parameters mapped to its variables).
	Env map[string]string
}

// githubEntry is the value of a github/<owner>/<repo> key, as E2B's SDK
// types it (GitHubMcpServer).
type githubEntry struct {
	RunCmd     string            `json:"runCmd"`
	InstallCmd string            `json:"installCmd"`
	Envs       map[string]string `json:"envs"`
}

var (
	repoPart     = regexp.MustCompile(`^[A-Za-z0-9_.-]*[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	prefixUnsafe = regexp.MustCompile(`[^A-Za-z0-9_-]+`)
)

// ParseConfig reads a gateway config, the JSON object E2B's SDK sends
// (`mcp-gateway --config '<json>'`): keys are catalog names or
// github/<owner>/<repo>. Servers come back sorted by key, so prefixes and
// start order do not depend on the JSON's order.
func ParseConfig(data []byte) ([]Server, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("the MCP config is not a JSON object: %w", err)
	}
	if dec.More() {
		return nil, errors.New("the MCP config has data after its JSON object")
	}
	if raw == nil {
		return nil, errors.New("the MCP config is not a JSON object: null")
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	servers := make([]Server, 0, len(keys))
	for _, key := range keys {
		s, err := parseServer(key, raw[key])
		if err != nil {
			return nil, err
		}
		servers = append(servers, s)
	}
	assignPrefixes(servers)
	return servers, nil
}

func parseServer(key string, value json.RawMessage) (Server, error) {
	if rest, ok := strings.CutPrefix(key, GitHubPrefix); ok {
		owner, repo, ok := strings.Cut(rest, "/")
		if !ok || !repoPart.MatchString(owner) || !repoPart.MatchString(repo) {
			return Server{}, fmt.Errorf("MCP server %q: a github entry is github/<owner>/<repo>", key)
		}
		var e githubEntry
		if err := strictUnmarshal(value, &e); err != nil {
			return Server{}, fmt.Errorf("MCP server %q: %w", key, err)
		}
		if strings.TrimSpace(e.RunCmd) == "" {
			return Server{}, fmt.Errorf("MCP server %q: runCmd is required (the command that starts its stdio server)", key)
		}
		for name := range e.Envs {
			if !validEnvName(name) {
				return Server{}, fmt.Errorf("MCP server %q: %q is not a valid environment variable name", key, name)
			}
		}
		return Server{Key: key, Repo: owner + "/" + repo, InstallCmd: e.InstallCmd, RunCmd: e.RunCmd, Env: e.Envs}, nil
	}
	entry, ok := catalog[key]
	if !ok {
		return Server{}, fmt.Errorf("unknown MCP server %q: this gateway's catalog has %s; any other server can be given as github/<owner>/<repo> with its runCmd",
			key, strings.Join(CatalogNames(), ", "))
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(value, &params); err != nil {
		return Server{}, fmt.Errorf("MCP server %q: its parameters are not a JSON object: %w", key, err)
	}
	args, env, err := entry.bind(params)
	if err != nil {
		return Server{}, fmt.Errorf("MCP server %q: %w", key, err)
	}
	return Server{Key: key, Catalog: entry, Args: args, Env: env}, nil
}

// strictUnmarshal decodes an object, refusing fields it does not know, so
// a misspelt runCmd says so instead of being ignored.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return errors.New("the entry is null")
	}
	return nil
}

func validEnvName(s string) bool {
	if s == "" || strings.ContainsAny(s, "=\x00") {
		return false
	}
	return true
}

// assignPrefixes names each server on the gateway: a catalog server by its
// key, a github one by its repository's name, or by owner_repo when two
// repositories share a name (or one shares a catalog name).
func assignPrefixes(servers []Server) {
	count := map[string]int{}
	short := func(s Server) string {
		if s.Repo == "" {
			return sanitizePrefix(s.Key)
		}
		_, repo, _ := strings.Cut(s.Repo, "/")
		return sanitizePrefix(repo)
	}
	for _, s := range servers {
		count[short(s)]++
	}
	for i := range servers {
		p := short(servers[i])
		if count[p] > 1 && servers[i].Repo != "" {
			p = sanitizePrefix(strings.ReplaceAll(servers[i].Repo, "/", "_"))
		}
		servers[i].Prefix = p
	}
	// Names made of others' parts can still meet (github/q/git beside the
	// catalog's git and github/z/q_git): number the later ones.
	seen := map[string]bool{}
	for i := range servers {
		p := servers[i].Prefix
		for n := 2; seen[p]; n++ {
			p = fmt.Sprintf("%s_%d", servers[i].Prefix, n)
		}
		seen[p] = true
		servers[i].Prefix = p
	}
}

func sanitizePrefix(s string) string {
	return strings.Trim(prefixUnsafe.ReplaceAllString(s, "_"), "_")
}
