package mcpgateway

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Installers of catalog servers.
const (
	// NPM servers are npm packages whose bin is the stdio server.
	NPM = "npm"
	// PyPI servers are Python packages whose console script is the
	// stdio server, installed in a venv of their own.
	PyPI = "pypi"
)

// CatalogEntry is a server the gateway knows by name: which package holds
// it and how the SDK's parameters for it (E2B's McpServer types) reach it.
type CatalogEntry struct {
	Name      string
	Installer string // NPM or PyPI
	Package   string
	// Script is a PyPI package's console script; npm packages name theirs
	// in package.json.
	Script string
	Params []Param
}

// Param maps one of an entry's parameters to the server: an environment
// variable, a flag, or (a list) positional arguments.
type Param struct {
	Name     string // as E2B's SDK spells it, e.g. "apiKey"
	Env      string // set this variable to the value
	Flag     string // pass "<Flag> <value>"
	Args     bool   // a list of strings, passed as arguments (after Flag, if set)
	Max      int    // a list of at most Max values (with Flag); 0 = a scalar, or any number with Args
	Required bool
}

// catalog is the servers known by name: E2B's catalog names whose stdio
// server is a published npm or PyPI package. Every other server is a
// github/<owner>/<repo> entry.
var catalog = indexCatalog([]*CatalogEntry{
	{Name: "brave", Installer: NPM, Package: "@modelcontextprotocol/server-brave-search",
		Params: []Param{{Name: "apiKey", Env: "BRAVE_API_KEY", Required: true}}},
	{Name: "context7", Installer: NPM, Package: "@upstash/context7-mcp",
		Params: []Param{{Name: "apiKey", Flag: "--api-key"}}},
	{Name: "exa", Installer: NPM, Package: "exa-mcp-server",
		Params: []Param{{Name: "apiKey", Env: "EXA_API_KEY", Required: true}}},
	{Name: "filesystem", Installer: NPM, Package: "@modelcontextprotocol/server-filesystem",
		Params: []Param{{Name: "paths", Args: true, Required: true}}},
	{Name: "memory", Installer: NPM, Package: "@modelcontextprotocol/server-memory"},
	{Name: "notion", Installer: NPM, Package: "@notionhq/notion-mcp-server",
		Params: []Param{{Name: "internalIntegrationToken", Env: "NOTION_TOKEN", Required: true}}},
	{Name: "sequentialthinking", Installer: NPM, Package: "@modelcontextprotocol/server-sequential-thinking"},
	{Name: "tavily", Installer: NPM, Package: "tavily-mcp",
		Params: []Param{{Name: "apiKey", Env: "TAVILY_API_KEY", Required: true}}},
	{Name: "fetch", Installer: PyPI, Package: "mcp-server-fetch", Script: "mcp-server-fetch"},
	{Name: "git", Installer: PyPI, Package: "mcp-server-git", Script: "mcp-server-git",
		Params: []Param{{Name: "paths", Flag: "--repository", Max: 1}}},
	{Name: "time", Installer: PyPI, Package: "mcp-server-time", Script: "mcp-server-time"},
})

func indexCatalog(entries []*CatalogEntry) map[string]*CatalogEntry {
	m := make(map[string]*CatalogEntry, len(entries))
	for _, e := range entries {
		m[e.Name] = e
	}
	return m
}

// CatalogNames lists the names the catalog knows, sorted.
func CatalogNames() []string { return slices.Sorted(maps.Keys(catalog)) }

// LookupCatalog returns the catalog entry of name.
func LookupCatalog(name string) (*CatalogEntry, bool) {
	e, ok := catalog[name]
	return e, ok
}

// bind turns the SDK's parameters for e into the server's arguments and
// environment.
func (e *CatalogEntry) bind(params map[string]json.RawMessage) (args []string, env map[string]string, err error) {
	known := map[string]bool{}
	env = map[string]string{}
	for _, p := range e.Params {
		known[p.Name] = true
		raw, ok := params[p.Name]
		if !ok || string(raw) == "null" {
			if p.Required {
				return nil, nil, fmt.Errorf("parameter %q is required", p.Name)
			}
			continue
		}
		if p.Args || p.Max > 0 {
			var list []string
			if err := json.Unmarshal(raw, &list); err != nil {
				return nil, nil, fmt.Errorf("parameter %q must be a list of strings", p.Name)
			}
			if p.Required && len(list) == 0 {
				return nil, nil, fmt.Errorf("parameter %q needs at least one value", p.Name)
			}
			if p.Max > 0 && len(list) > p.Max {
				return nil, nil, fmt.Errorf("parameter %q takes at most %d value(s), got %d", p.Name, p.Max, len(list))
			}
			for _, v := range list {
				if p.Flag != "" {
					args = append(args, p.Flag)
				}
				args = append(args, v)
			}
			continue
		}
		v, err := scalar(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("parameter %q: %w", p.Name, err)
		}
		if p.Env != "" {
			env[p.Env] = v
		}
		if p.Flag != "" {
			args = append(args, p.Flag, v)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(params)) {
		if !known[name] {
			names := make([]string, 0, len(e.Params))
			for _, p := range e.Params {
				names = append(names, p.Name)
			}
			if len(names) == 0 {
				return nil, nil, fmt.Errorf("unknown parameter %q: it takes none", name)
			}
			return nil, nil, fmt.Errorf("unknown parameter %q: it takes %s", name, strings.Join(names, ", "))
		}
	}
	return args, env, nil
}

// scalar is a string, number or boolean parameter as text.
func scalar(raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case bool:
		return strconv.FormatBool(v), nil
	}
	return "", fmt.Errorf("must be a string, number or boolean")
}
