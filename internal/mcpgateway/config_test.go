package mcpgateway

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		want    []Server // Catalog compared by name only
		wantErr string
	}{
		{name: "github entry", config: `{"github/acme/echo-server":{"installCmd":"npm ci","runCmd":"node index.js","envs":{"K":"v"}}}`,
			want: []Server{{Key: "github/acme/echo-server", Prefix: "echo-server", Repo: "acme/echo-server", InstallCmd: "npm ci", RunCmd: "node index.js", Env: map[string]string{"K": "v"}}}},
		{name: "catalog entries", config: `{"brave":{"apiKey":"k"},"memory":{},"filesystem":{"paths":["/w"]},"git":{"paths":["/r"]}}`,
			want: []Server{
				{Key: "brave", Prefix: "brave", Env: map[string]string{"BRAVE_API_KEY": "k"}},
				{Key: "filesystem", Prefix: "filesystem", Args: []string{"/w"}, Env: map[string]string{}},
				{Key: "git", Prefix: "git", Args: []string{"--repository", "/r"}, Env: map[string]string{}},
				{Key: "memory", Prefix: "memory", Env: map[string]string{}},
			}},
		{name: "context7 key is a flag", config: `{"context7":{"apiKey":"k"}}`,
			want: []Server{{Key: "context7", Prefix: "context7", Args: []string{"--api-key", "k"}, Env: map[string]string{}}}},
		{name: "same repo names", config: `{"github/a/x":{"runCmd":"r"},"github/b/x":{"runCmd":"r"},"github/q/git":{"runCmd":"r"},"git":{}}`,
			want: []Server{
				{Key: "git", Prefix: "git", Env: map[string]string{}},
				{Key: "github/a/x", Prefix: "a_x", Repo: "a/x", RunCmd: "r"},
				{Key: "github/b/x", Prefix: "b_x", Repo: "b/x", RunCmd: "r"},
				{Key: "github/q/git", Prefix: "q_git", Repo: "q/git", RunCmd: "r"},
			}},
		{name: "empty", config: `{}`, want: []Server{}},
		{name: "not an object", config: `["brave"]`, wantErr: "not a JSON object"},
		{name: "null", config: `null`, wantErr: "not a JSON object"},
		{name: "trailing data", config: `{} {}`, wantErr: "data after"},
		{name: "no runCmd", config: `{"github/a/b":{"installCmd":"x"}}`, wantErr: `"github/a/b": runCmd is required`},
		{name: "misspelt field", config: `{"github/a/b":{"runCommand":"x"}}`, wantErr: `unknown field "runCommand"`},
		{name: "null github entry", config: `{"github/a/b":null}`, wantErr: "null"},
		{name: "bad repo", config: `{"github/a":{"runCmd":"x"}}`, wantErr: "github/<owner>/<repo>"},
		{name: "path in repo", config: `{"github/a/b/c":{"runCmd":"x"}}`, wantErr: "github/<owner>/<repo>"},
		{name: "dots repo", config: `{"github/a/..":{"runCmd":"x"}}`, wantErr: "github/<owner>/<repo>"},
		{name: "bad env name", config: `{"github/a/b":{"runCmd":"x","envs":{"A=B":"c"}}}`, wantErr: "not a valid environment variable name"},
		{name: "unknown catalog name", config: `{"nosuch":{}}`, wantErr: `unknown MCP server "nosuch": this gateway's catalog has brave, context7,`},
		{name: "missing required", config: `{"brave":{}}`, wantErr: `"brave": parameter "apiKey" is required`},
		{name: "unknown parameter", config: `{"brave":{"apiKey":"k","region":"x"}}`, wantErr: `unknown parameter "region": it takes apiKey`},
		{name: "parameter of none", config: `{"memory":{"x":1}}`, wantErr: "it takes none"},
		{name: "list expected", config: `{"filesystem":{"paths":"/w"}}`, wantErr: "must be a list of strings"},
		{name: "too many", config: `{"git":{"paths":["/a","/b"]}}`, wantErr: "at most 1"},
		{name: "object scalar", config: `{"brave":{"apiKey":{}}}`, wantErr: "must be a string, number or boolean"},
		{name: "params not object", config: `{"memory":[]}`, wantErr: "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tt.config))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if got[i].Catalog != nil && got[i].Catalog.Name != got[i].Key {
					t.Errorf("%s resolved to catalog entry %s", got[i].Key, got[i].Catalog.Name)
				}
				got[i].Catalog = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseConfig (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{`{"github/a/x":{"runCmd":"r"},"github/b/x":{"runCmd":"r"}}`, `{"brave":{"apiKey":"k"}}`,
		`{"git":{},"github/q/git":{"runCmd":"r"},"github/z/q_git":{"runCmd":"r"}}`, `{"filesystem":{"paths":["/"]}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, config string) {
		servers, err := ParseConfig([]byte(config))
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, s := range servers {
			if s.Prefix == "" || seen[s.Prefix] || sanitizePrefix(s.Prefix) != s.Prefix {
				t.Fatalf("prefix %q of %q is empty, taken or unsafe", s.Prefix, s.Key)
			}
			seen[s.Prefix] = true
			if (s.Repo == "") == (s.Catalog == nil) {
				t.Fatalf("%q is neither a github nor a catalog server", s.Key)
			}
		}
	})
}

func TestNPMBin(t *testing.T) {
	tests := []struct {
		name, pkg, json, want, wantErr string
	}{
		{"string bin", "@scope/server-x", `{"bin":"dist/index.js"}`, "server-x", ""},
		{"one named bin", "tavily-mcp", `{"bin":{"tavily":"index.js"}}`, "tavily", ""},
		{"named like the package", "@x/srv", `{"bin":{"other":"a.js","srv":"b.js"}}`, "srv", ""},
		{"ambiguous", "@x/srv", `{"bin":{"a":"a.js","b":"b.js"}}`, "", "several bins"},
		{"none", "p", `{}`, "", "no bin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := npmBin(tt.pkg, []byte(tt.json))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("npmBin = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
