package sandbox

import (
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// FuzzRuleKey: a key the parser accepts has one normal form, which
// parses to itself, is lowercase, and is a name, a wildcard or a prefix.
func FuzzRuleKey(f *testing.F) {
	for _, s := range []string{"api.example.com", "*.COM", "*", "10.0.0.1/8", "::ffff:1.2.3.4", "a.*.b", "*.-a.com", "x.123", "ex_ample.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseRuleKey(s)
		if err != nil {
			if KindOf(err) != KindInvalid {
				t.Fatalf("ParseRuleKey(%q): %v is not KindInvalid", s, err)
			}
			return
		}
		norm := k.String()
		again, err := ParseRuleKey(norm)
		if err != nil || again != k || again.String() != norm {
			t.Fatalf("ParseRuleKey(%q) = %q, which parses to %+v, %v", s, norm, again, err)
		}
		if norm != strings.ToLower(norm) || norm == "" || norm == "*" {
			t.Fatalf("ParseRuleKey(%q) normal form %q", s, norm)
		}
		if k.Prefix.IsValid() == (k.Name != "") || (k.Wildcard && k.Name == "") {
			t.Fatalf("ParseRuleKey(%q) = %+v mixes kinds", s, k)
		}
	})
}

// FuzzPlaceholders: a value that parses expands back to itself when each
// placeholder resolves to its own text, loses every "${e2b." when each
// resolves to nothing, and its placeholders name only names their kind
// allows.
func FuzzPlaceholders(f *testing.F) {
	for _, s := range []string{"Bearer ${e2b.secrets.k}", "${e2b.identity.tokens.a b}x${e2b.secrets.y}", "${e2b.", "${e2b.secrets.}", "$${e2b.secrets.a}}", "${e2b.secrets.a${e2b.secrets.b}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParsePlaceholders(s)
		if err != nil {
			if KindOf(err) != KindInvalid {
				t.Fatalf("ParsePlaceholders(%q): %v is not KindInvalid", s, err)
			}
			return
		}
		same, err := ExpandPlaceholders(s, func(p Placeholder) (string, error) { return p.Text, nil })
		if err != nil || same != s {
			t.Fatalf("expanding %q to itself gave %q, %v", s, same, err)
		}
		gone, _ := ExpandPlaceholders(s, func(Placeholder) (string, error) { return "", nil })
		if strings.Contains(gone, placeholderOpen) {
			t.Fatalf("expanding %q to nothing left %q", s, gone)
		}
		for _, p := range ps {
			if !strings.HasPrefix(p.Text, placeholderOpen) || !strings.HasSuffix(p.Text, "}") || strings.Count(p.Text, "}") != 1 {
				t.Fatalf("placeholder %+v of %q", p, s)
			}
			if p.Kind == PlaceholderSecret && ValidateSecretName(p.Name) != nil && !strings.HasPrefix(strings.ToLower(p.Name), SecretIDPrefix) {
				t.Fatalf("secret placeholder %+v of %q names an impossible secret", p, s)
			}
			if p.Kind == PlaceholderToken && validTokenName(p.Name) != nil {
				t.Fatalf("token placeholder %+v of %q names an impossible token", p, s)
			}
		}
	})
}

// FuzzNormalizeRules: rules that pass set only headers a request can
// carry and that the gateway does not own.
func FuzzNormalizeRules(f *testing.F) {
	f.Add("api.example.com", "Authorization", "Bearer ${e2b.secrets.k}")
	f.Add("*.x.com", "host", "a")
	f.Add("10.0.0.0/8", "X-A", "a\r\nb")
	f.Fuzz(func(t *testing.T, key, name, value string) {
		out, err := NormalizeRules(map[string][]NetworkRule{key: {{Headers: map[string]string{name: value}}}})
		if err != nil {
			if KindOf(err) != KindInvalid {
				t.Fatalf("NormalizeRules: %v is not KindInvalid", err)
			}
			return
		}
		if len(out) != 1 {
			t.Fatalf("NormalizeRules kept %d keys of 1", len(out))
		}
		for k, list := range out {
			if _, err := ParseRuleKey(k); err != nil {
				t.Fatalf("stored key %q does not parse: %v", k, err)
			}
			for h, v := range list[0].Headers {
				canon := http.CanonicalHeaderKey(h)
				if !httpguts.ValidHeaderFieldName(h) || !httpguts.ValidHeaderFieldValue(v) || canon == "Host" || canon == "Content-Length" || canon == "Transfer-Encoding" {
					t.Fatalf("accepted header %q: %q", h, v)
				}
			}
		}
	})
}

// FuzzMaskRequestHost: an accepted mask, its ${PORT} filled in, is a
// Host header value that says nothing but a host and a port.
func FuzzMaskRequestHost(f *testing.F) {
	for _, s := range []string{"localhost:${PORT}", "${PORT}-x.e2b.app", "[::1]:80", "a\r\nb", "a/b", "a@b", "a:1:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidateMaskRequestHost(s) != nil {
			return
		}
		h := strings.ReplaceAll(s, "${PORT}", "49983")
		if !httpguts.ValidHostHeader(h) || strings.ContainsAny(h, " \t\r\n/@?#\\,") {
			t.Fatalf("accepted mask %q gives the Host %q", s, h)
		}
	})
}
