package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// TestSecretsCRUD drives the secrets API as the SDK's Secret does: by ID
// and by name, with versions and metadata, and no answer carrying a value.
func TestSecretsCRUD(t *testing.T) {
	a := newAPI(t)
	const v1, v2 = "sk-first-value-0001", "sk-second-value-0002"
	noValue := func(what string, r response) {
		t.Helper()
		if strings.Contains(string(r.body), v1) || strings.Contains(string(r.body), v2) {
			t.Errorf("%s: the answer carries a secret value: %s", what, r.body)
		}
	}
	r := a.do(t, "POST", "/secrets", map[string]any{"name": "OpenAI-Key", "value": v1, "metadata": map[string]string{"owner": "ci"}})
	noValue("create", r)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var sec secretJSON
	r.decode(t, &sec)
	if !strings.HasPrefix(sec.SecretID, "sec_") || sec.Name != "openai-key" || sec.CurrentVersion != 1 || sec.Metadata["owner"] != "ci" || sec.CreatedAt.IsZero() {
		t.Fatalf("create answered %+v", sec)
	}
	for _, ref := range []string{sec.SecretID, "openai-key", "OPENAI-KEY"} {
		r := a.do(t, "GET", "/secrets/"+ref, nil)
		noValue("get "+ref, r)
		var got secretJSON
		if r.status != http.StatusOK {
			t.Fatalf("get %s: %d %s", ref, r.status, r.body)
		}
		if r.decode(t, &got); got.SecretID != sec.SecretID {
			t.Errorf("get %s: %+v", ref, got)
		}
	}
	r = a.do(t, "POST", "/secrets/openai-key", map[string]any{"value": v2})
	noValue("update", r)
	var up secretJSON
	if r.decode(t, &up); r.status != http.StatusOK || up.CurrentVersion != 2 || up.Metadata["owner"] != "ci" || !up.UpdatedAt.After(up.CreatedAt) {
		t.Errorf("update without metadata: %d %s", r.status, r.body)
	}
	r = a.do(t, "POST", "/secrets/"+sec.SecretID, map[string]any{"value": v1, "metadata": map[string]string{}})
	up = secretJSON{}
	if r.decode(t, &up); r.status != http.StatusOK || up.CurrentVersion != 3 || len(up.Metadata) != 0 {
		t.Errorf("update with empty metadata: %d %s", r.status, r.body)
	}
	if v, err := a.secrets.Expand(context.Background(), "", "default", "Bearer ${e2b.secrets.openai-key}"); err != nil || v != "Bearer "+v1 {
		t.Errorf("the current version does not resolve: %q, %v", v, err)
	}

	for _, name := range []string{"b-second", "c-third"} {
		if r := a.do(t, "POST", "/secrets", map[string]any{"name": name, "value": "x"}); r.status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
	}
	var names []string
	next := ""
	for pages := 0; ; pages++ {
		r := a.do(t, "GET", "/secrets?limit=2&nextToken="+next, nil)
		noValue("list", r)
		var page []secretJSON
		if r.decode(t, &page); r.status != http.StatusOK || len(page) > 2 || pages > 3 {
			t.Fatalf("list: %d %s", r.status, r.body)
		}
		for _, s := range page {
			names = append(names, s.Name)
		}
		if next = r.header.Get("X-Next-Token"); next == "" {
			break
		}
	}
	if got := strings.Join(names, ","); got != "b-second,c-third,openai-key" {
		t.Errorf("listed %s", got)
	}

	if r := a.do(t, "DELETE", "/secrets/OpenAI-Key", nil); r.status != http.StatusNoContent {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	wantError(t, "get deleted", a.do(t, "GET", "/secrets/"+sec.SecretID, nil), http.StatusNotFound)
	wantError(t, "delete deleted", a.do(t, "DELETE", "/secrets/openai-key", nil), http.StatusNotFound)
	wantError(t, "update deleted", a.do(t, "POST", "/secrets/openai-key", map[string]any{"value": "x"}), http.StatusNotFound)
}

// TestSecretsInvalid: what the API refuses, with a 400 (or 409) and
// nothing stored.
func TestSecretsInvalid(t *testing.T) {
	a := newAPI(t)
	if r := a.do(t, "POST", "/secrets", map[string]any{"name": "taken", "value": "v"}); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	bigMeta := map[string]string{}
	for i := range 33 {
		bigMeta[fmt.Sprint("k", i)] = "v"
	}
	for _, c := range []struct {
		what   string
		body   any
		status int
		says   string
	}{
		{"empty name", map[string]any{"name": "", "value": "v"}, 400, "invalid secret name"},
		{"name with a space", map[string]any{"name": "a b", "value": "v"}, 400, "invalid secret name"},
		{"name with braces", map[string]any{"name": "a{b}", "value": "v"}, 400, "invalid secret name"},
		{"name too long", map[string]any{"name": strings.Repeat("a", 129), "value": "v"}, 400, "invalid secret name"},
		{"reserved prefix", map[string]any{"name": "SEC_abc", "value": "v"}, 400, "reserved"},
		{"no name", map[string]any{"value": "v"}, 400, "required"},
		{"no value", map[string]any{"name": "n"}, 400, "required"},
		{"empty value", map[string]any{"name": "n", "value": ""}, 400, "empty"},
		{"value with a newline", map[string]any{"name": "n", "value": "abc\n"}, 400, "newline"},
		{"value too large", map[string]any{"name": "n", "value": strings.Repeat("x", 16<<10+1)}, 400, "at most"},
		{"too much metadata", map[string]any{"name": "n", "value": "v", "metadata": bigMeta}, 400, "at most 32"},
		{"name taken", map[string]any{"name": "TAKEN", "value": "v"}, 409, "already exists"},
		{"no body", "", 400, "body is empty"},
		{"wrong type", `{"name": 1, "value": "v"}`, 400, "name"},
	} {
		wantAnswer(t, c.what, a.do(t, "POST", "/secrets", c.body), c.status, c.says)
	}
	wantAnswer(t, "update without value", a.do(t, "POST", "/secrets/taken", map[string]any{}), 400, "value is required")
	wantAnswer(t, "list limit 0", a.do(t, "GET", "/secrets?limit=0", nil), 400, "limit")
	wantAnswer(t, "list bad token", a.do(t, "GET", "/secrets?nextToken=%7B", nil), 400, "nextToken")
	var list []secretJSON
	r := a.do(t, "GET", "/secrets", nil)
	if r.decode(t, &list); len(list) != 1 {
		t.Errorf("after refused creates the team has %s", r.body)
	}
	wantError(t, "no key", a.doKey(t, "", "GET", "/secrets", nil), http.StatusUnauthorized)
}

// TestSecretsTeams: a team sees, changes and resolves only its own
// secrets; another team's are not found, and its names are its own.
func TestSecretsTeams(t *testing.T) {
	a := newAPI(t)
	r := a.do(t, "POST", "/secrets", map[string]any{"name": "shared-name", "value": "default-value"})
	var sec secretJSON
	r.decode(t, &sec)
	for _, ref := range []string{sec.SecretID, "shared-name"} {
		wantError(t, "other team get "+ref, a.doKey(t, a.otherKey, "GET", "/secrets/"+ref, nil), http.StatusNotFound)
		wantError(t, "other team update "+ref, a.doKey(t, a.otherKey, "POST", "/secrets/"+ref, map[string]any{"value": "x"}), http.StatusNotFound)
		wantError(t, "other team delete "+ref, a.doKey(t, a.otherKey, "DELETE", "/secrets/"+ref, nil), http.StatusNotFound)
	}
	if r := a.doKey(t, a.otherKey, "GET", "/secrets", nil); string(r.body) != "[]\n" && string(r.body) != "[]" {
		t.Errorf("other team lists %s", r.body)
	}
	if r := a.doKey(t, a.otherKey, "POST", "/secrets", map[string]any{"name": "shared-name", "value": "other-value"}); r.status != http.StatusCreated {
		t.Errorf("other team cannot use a name the default team has: %d %s", r.status, r.body)
	}
	for team, want := range map[string]string{"default": "default-value", "other": "other-value"} {
		if v, err := a.secrets.Expand(context.Background(), "", team, "${e2b.secrets.shared-name}"); err != nil || v != want {
			t.Errorf("team %s resolves %q, %v; want %q", team, v, err, want)
		}
	}
	if r := a.do(t, "GET", "/secrets/"+sec.SecretID, nil); r.status != http.StatusOK {
		t.Errorf("the default team's secret after the other's attempts: %d %s", r.status, r.body)
	}
}

// TestNetworkRulesAPI: rules and iam are checked at create and PUT
// network (a placeholder that cannot resolve is a 400 naming it), stored
// in normal form, and shown with placeholders, never values.
func TestNetworkRulesAPI(t *testing.T) {
	a := newAPI(t)
	const value = "sk-never-shown-1234"
	if r := a.do(t, "POST", "/secrets", map[string]any{"name": "api-key", "value": value}); r.status != http.StatusCreated {
		t.Fatal(r.status, string(r.body))
	}
	if r := a.doKey(t, a.otherKey, "POST", "/secrets", map[string]any{"name": "theirs", "value": "v"}); r.status != http.StatusCreated {
		t.Fatal(r.status, string(r.body))
	}
	rule := func(key, header, v string) map[string]any {
		return map[string]any{key: []any{map[string]any{"transform": map[string]any{"headers": map[string]string{header: v}}}}}
	}
	iam := map[string]any{"tokens": map[string]any{"aws": map[string]string{"audience": "sts.amazonaws.com", "tokenType": "JWT-SVID"}}}
	for _, c := range []struct {
		what string
		body map[string]any
		says string
	}{
		{"unknown secret", map[string]any{"network": map[string]any{"rules": rule("api.example.com", "Authorization", "Bearer ${e2b.secrets.missing}")}}, "${e2b.secrets.missing}"},
		{"another team's secret", map[string]any{"network": map[string]any{"rules": rule("api.example.com", "X-Key", "${e2b.secrets.theirs}")}}, "${e2b.secrets.theirs}"},
		{"token without iam", map[string]any{"network": map[string]any{"rules": rule("api.example.com", "Authorization", "${e2b.identity.tokens.aws}")}}, "${e2b.identity.tokens.aws}"},
		{"unknown token", map[string]any{"iam": iam, "network": map[string]any{"rules": rule("api.example.com", "Authorization", "${e2b.identity.tokens.gcp}")}}, "${e2b.identity.tokens.gcp}"},
		{"malformed placeholder", map[string]any{"network": map[string]any{"rules": rule("api.example.com", "X", "${e2b.secret.api-key}")}}, "${e2b.secret.api-key}"},
		{"unclosed placeholder", map[string]any{"network": map[string]any{"rules": rule("api.example.com", "X", "${e2b.secrets.api-key")}}, "not closed"},
		{"bare wildcard", map[string]any{"network": map[string]any{"rules": rule("*", "X", "v")}}, "'*'"},
		{"bad header name", map[string]any{"network": map[string]any{"rules": rule("api.example.com", "Bad Header", "v")}}, "not a valid header name"},
		{"reserved header", map[string]any{"network": map[string]any{"rules": rule("api.example.com", "host", "evil.com")}}, "Host cannot be set"},
		{"header value with CRLF", map[string]any{"network": map[string]any{"rules": rule("api.example.com", "X", "a\r\nX-Evil: 1")}}, "CR, LF"},
		{"duplicate key", map[string]any{"network": map[string]any{"rules": map[string]any{"API.example.com": []any{}, "api.example.com.": []any{}}}}, "twice"},
		{"bad token type", map[string]any{"iam": map[string]any{"tokens": map[string]any{"t": map[string]string{"audience": "a", "tokenType": "OAuth"}}}}, "JWT-SVID"},
		{"empty audience", map[string]any{"iam": map[string]any{"tokens": map[string]any{"t": map[string]string{"tokenType": "JWT-SVID"}}}}, "audience"},
		{"token name with a brace", map[string]any{"iam": map[string]any{"tokens": map[string]any{"a}": map[string]string{"audience": "a", "tokenType": "JWT-SVID"}}}}, "not usable"},
		{"mask with CRLF", map[string]any{"network": map[string]any{"maskRequestHost": "example.com\r\nX-Evil: 1"}}, "maskRequestHost"},
		{"mask with junk", map[string]any{"network": map[string]any{"maskRequestHost": "exa mple.com/${PORT}"}}, "maskRequestHost"},
		{"mask with a bad port", map[string]any{"network": map[string]any{"maskRequestHost": "example.com:99999"}}, "maskRequestHost"},
	} {
		c.body["templateID"] = "base"
		wantAnswer(t, c.what, a.do(t, "POST", "/v2/sandboxes", c.body), http.StatusBadRequest, c.says)
	}
	if n := len(a.rt.Containers()); n != 0 {
		t.Fatalf("refused creates left %d containers", n)
	}

	sb := a.create(t, map[string]any{"templateID": "base", "iam": iam, "network": map[string]any{
		"allowOut":        []string{"API.Example.com", "10.1.2.3"},
		"maskRequestHost": "${PORT}-sb.example.com",
		"rules": map[string]any{
			"API.Example.com": []any{map[string]any{"transform": map[string]any{"headers": map[string]string{"Authorization": "Bearer ${e2b.secrets.API-KEY}"}}}},
			"*.Example.org":   []any{map[string]any{"transform": map[string]any{"headers": map[string]string{"X-Token": "${e2b.identity.tokens.aws}"}}}},
			"10.1.2.0/24":     []any{map[string]any{}},
			"::ffff:10.1.2.3": []any{map[string]any{"transform": map[string]any{"headers": map[string]string{"X-A": "1"}}}},
		},
	}})
	id := sb["sandboxID"].(string)
	r := a.do(t, "GET", "/sandboxes/"+id, nil)
	if strings.Contains(string(r.body), value) {
		t.Errorf("getInfo shows the secret's value: %s", r.body)
	}
	var info struct {
		Network struct {
			MaskRequestHost string `json:"maskRequestHost"`
			Rules           map[string][]struct {
				Transform struct {
					Headers map[string]string `json:"headers"`
				} `json:"transform"`
			} `json:"rules"`
		} `json:"network"`
	}
	r.decode(t, &info)
	keys := []string{}
	for k := range info.Network.Rules {
		keys = append(keys, k)
	}
	if got := info.Network.Rules["api.example.com"]; len(got) != 1 || got[0].Transform.Headers["Authorization"] != "Bearer ${e2b.secrets.API-KEY}" {
		t.Errorf("getInfo rules %v, want normal keys with placeholders kept", info.Network.Rules)
	}
	for _, k := range []string{"*.example.org", "10.1.2.0/24", "10.1.2.3"} {
		if _, ok := info.Network.Rules[k]; !ok {
			t.Errorf("getInfo rules keys %v lack %s", keys, k)
		}
	}
	if info.Network.MaskRequestHost != "${PORT}-sb.example.com" {
		t.Errorf("maskRequestHost %q", info.Network.MaskRequestHost)
	}
	stored, err := a.m.Get(context.Background(), "default", id)
	if err != nil || stored.IAM.Tokens["aws"].Audience != "sts.amazonaws.com" {
		t.Errorf("the sandbox's iam is not stored: %+v %v", stored.IAM, err)
	}

	p := "/sandboxes/" + id + "/network"
	wantAnswer(t, "PUT an unknown token", a.do(t, "PUT", p, map[string]any{"rules": rule("x.example.com", "A", "${e2b.identity.tokens.gcp}")}), 400, "${e2b.identity.tokens.gcp}")
	wantAnswer(t, "PUT another team's secret", a.do(t, "PUT", p, map[string]any{"rules": rule("x.example.com", "A", "${e2b.secrets.theirs}")}), 400, "${e2b.secrets.theirs}")
	wantError(t, "PUT by another team", a.doKey(t, a.otherKey, "PUT", p, map[string]any{"rules": rule("x.example.com", "A", "${e2b.secrets.theirs}")}), 404)
	if r := a.do(t, "PUT", p, map[string]any{"rules": rule("X.example.com", "A", "${e2b.identity.tokens.aws} ${e2b.secrets.api-key}")}); r.status != http.StatusNoContent {
		t.Fatalf("PUT rules: %d %s", r.status, r.body)
	}
	stored, _ = a.m.Get(context.Background(), "default", id)
	if _, ok := stored.Network.Rules["x.example.com"]; !ok || len(stored.Network.Rules) != 1 {
		t.Errorf("PUT network stored rules %v", stored.Network.Rules)
	}
}

// TestIdentityEndpoints: the discovery document and the JWKS are served
// without a key, and a minted token verifies against that JWKS with the
// claims a cloud's STS checks.
func TestIdentityEndpoints(t *testing.T) {
	a := newAPI(t)
	var disc struct {
		Issuer  string   `json:"issuer"`
		JWKSURI string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	r := a.doKey(t, "", "GET", "/.well-known/openid-configuration", nil)
	if r.decode(t, &disc); r.status != 200 || disc.Issuer != "https://warren.test" || disc.JWKSURI != "https://warren.test/.well-known/jwks.json" || len(disc.Algs) != 1 {
		t.Fatalf("discovery: %d %s", r.status, r.body)
	}
	var set jose.JSONWebKeySet
	r = a.doKey(t, "", "GET", "/.well-known/jwks.json", nil)
	if r.decode(t, &set); r.status != 200 || len(set.Keys) == 0 || strings.Contains(string(r.body), `"d"`) {
		t.Fatalf("jwks: %d %s", r.status, r.body)
	}
	tok, err := a.iss.Mint(context.Background(), "sts.amazonaws.com", "isandbox1", "default")
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	var c jwt.Claims
	if err := parsed.Claims(set, &c); err != nil {
		t.Fatalf("token does not verify against the served JWKS: %v", err)
	}
	if err := c.Validate(jwt.Expected{Issuer: "https://warren.test", AnyAudience: jwt.Audience{"sts.amazonaws.com"}, Time: time.Now()}); err != nil {
		t.Error(err)
	}
	if c.Subject != "spiffe://warren.test/team/default/sandbox/isandbox1" {
		t.Errorf("sub %q", c.Subject)
	}
}
