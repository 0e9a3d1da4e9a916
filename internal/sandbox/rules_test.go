package sandbox

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRuleKey(t *testing.T) {
	for _, c := range []struct {
		in, want string // want "" = refused
	}{
		{"api.example.com", "api.example.com"},
		{"API.Example.COM.", "api.example.com"},
		{"*.example.com", "*.example.com"},
		{"*.COM", "*.com"},
		{"10.1.2.3", "10.1.2.3"},
		{"::ffff:10.1.2.3", "10.1.2.3"},
		{"10.1.2.3/24", "10.1.2.0/24"},
		{"2001:db8::1/32", "2001:db8::/32"},
		{"*", ""},
		{"*.", ""},
		{"*.*.example.com", ""},
		{"a.*.example.com", ""},
		{"example", ""},
		{"*.123", ""},
		{"exa mple.com", ""},
		{"-x.example.com", ""},
		{"fe80::1%eth0", ""},
		{"", ""},
	} {
		k, err := ParseRuleKey(c.in)
		if c.want == "" {
			if err == nil {
				t.Errorf("ParseRuleKey(%q) = %v, want an error", c.in, k)
			}
			continue
		}
		if err != nil || k.String() != c.want {
			t.Errorf("ParseRuleKey(%q) = %q, %v; want %q", c.in, k.String(), err, c.want)
		}
	}
}

func TestParsePlaceholders(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []Placeholder
		err  string
	}{
		{"plain", nil, ""},
		{"${HOME} and ${e2b} stay", nil, ""},
		{"Bearer ${e2b.secrets.Api_Key-1}", []Placeholder{{PlaceholderSecret, "Api_Key-1", "${e2b.secrets.Api_Key-1}"}}, ""},
		{"${e2b.identity.tokens.aws}:${e2b.secrets.b}", []Placeholder{
			{PlaceholderToken, "aws", "${e2b.identity.tokens.aws}"}, {PlaceholderSecret, "b", "${e2b.secrets.b}"}}, ""},
		{"${e2b.identity.tokens.a b.c}", []Placeholder{{PlaceholderToken, "a b.c", "${e2b.identity.tokens.a b.c}"}}, ""},
		{"${e2b.secrets.}", nil, "no possible secret"},
		{"${e2b.secrets.a.b}", nil, "no possible secret"},
		{"${e2b.identity.tokens.}", nil, "no possible token"},
		{"${e2b.identity.tokens.a${b}", nil, "no possible token"},
		{"${e2b.secret.x}", nil, "neither"},
		{"${e2b.secrets.x", nil, "not closed"},
	} {
		got, err := ParsePlaceholders(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || KindOf(err) != KindInvalid {
				t.Errorf("ParsePlaceholders(%q) err = %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePlaceholders(%q): %v", c.in, err)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("ParsePlaceholders(%q) (-want +got):\n%s", c.in, diff)
		}
	}
}

func TestExpandPlaceholders(t *testing.T) {
	got, err := ExpandPlaceholders("a ${e2b.secrets.x} b ${e2b.identity.tokens.t}${e2b.secrets.x}", func(p Placeholder) (string, error) {
		if p.Kind == PlaceholderSecret {
			return "S", nil
		}
		return "T", nil
	})
	if err != nil || got != "a S b TS" {
		t.Errorf("ExpandPlaceholders = %q, %v", got, err)
	}
	// A resolved value is not parsed again: a secret whose value looks
	// like a placeholder does not reach another.
	got, err = ExpandPlaceholders("${e2b.secrets.x}", func(p Placeholder) (string, error) { return "${e2b.secrets.y}", nil })
	if err != nil || got != "${e2b.secrets.y}" {
		t.Errorf("ExpandPlaceholders of a placeholder-like value = %q, %v", got, err)
	}
}

func TestNormalizeRules(t *testing.T) {
	rule := func(h map[string]string) []NetworkRule { return []NetworkRule{{Headers: h}} }
	got, err := NormalizeRules(map[string][]NetworkRule{
		"API.example.com": rule(map[string]string{"authorization": "Bearer ${e2b.secrets.k}"}),
		"10.0.0.1/8":      nil,
	})
	want := map[string][]NetworkRule{"api.example.com": rule(map[string]string{"authorization": "Bearer ${e2b.secrets.k}"}), "10.0.0.0/8": nil}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("NormalizeRules = %v, %v; want %v", got, err, want)
	}
	for what, rules := range map[string]map[string][]NetworkRule{
		"bad key":         {"a b": nil},
		"twice":           {"a.example.com": nil, "A.EXAMPLE.COM": nil},
		"ip twice":        {"::ffff:1.2.3.4": nil, "1.2.3.4": nil},
		"reserved":        {"a.example.com": rule(map[string]string{"Content-Length": "1"})},
		"proxy header":    {"a.example.com": rule(map[string]string{"proxy-authorization": "x"})},
		"bad name":        {"a.example.com": rule(map[string]string{"a:b": "x"})},
		"NUL in value":    {"a.example.com": rule(map[string]string{"A": "x\x00"})},
		"LF in value":     {"a.example.com": rule(map[string]string{"A": "x\ny"})},
		"bad placeholder": {"a.example.com": rule(map[string]string{"A": "${e2b.nope}"})},
	} {
		if _, err := NormalizeRules(rules); err == nil || KindOf(err) != KindInvalid {
			t.Errorf("%s: NormalizeRules err = %v, want KindInvalid", what, err)
		}
	}
}

func TestCheckTokens(t *testing.T) {
	rules := map[string][]NetworkRule{"a.example.com": {{Headers: map[string]string{"A": "${e2b.identity.tokens.aws}", "B": "${e2b.secrets.s}"}}}}
	if err := CheckTokens(rules, IAM{}); err == nil || !strings.Contains(err.Error(), "${e2b.identity.tokens.aws}") {
		t.Errorf("without iam: %v", err)
	}
	if err := CheckTokens(rules, IAM{Tokens: map[string]IAMToken{"aws": {Audience: "x", TokenType: TokenTypeJWTSVID}}}); err != nil {
		t.Errorf("with iam: %v", err)
	}
}

func TestValidateMaskRequestHost(t *testing.T) {
	for in, ok := range map[string]bool{
		"localhost:${PORT}":         true,
		"${PORT}-sandboxid.e2b.app": true,
		"example.com":               true,
		"my_host.internal:8080":     true,
		"10.0.0.1:${PORT}":          true,
		"[::1]:${PORT}":             true,
		"[::1]":                     true,
		"example.com\r\nX-Evil: 1":  false,
		"example.com\n":             false,
		"exa mple.com":              false,
		"example.com/path":          false,
		"example.com:0":             false,
		"example.com:65536":         false,
		"example.com:+80":           false,
		"example.com:":              false,
		"::1":                       false,
		"[::1":                      false,
		"[fe80::1%eth0]":            false,
		"user@example.com":          false,
		"":                          false,
		strings.Repeat("a", 256):    false,
		"a..b":                      false,
		"${PORT}":                   true,
		"${PORT}.${PORT}:${PORT}":   true,
		"${HOST}.example.com":       false,
	} {
		if err := ValidateMaskRequestHost(in); (err == nil) != ok {
			t.Errorf("ValidateMaskRequestHost(%q) = %v, want ok=%v", in, err, ok)
		}
	}
}

func TestIAMValidate(t *testing.T) {
	ok := IAMToken{Audience: "sts.amazonaws.com", TokenType: TokenTypeJWTSVID}
	if err := (IAM{Tokens: map[string]IAMToken{"aws": ok, "with space.and-dots": ok}}).Validate(); err != nil {
		t.Error(err)
	}
	for what, iam := range map[string]IAM{
		"empty name":  {Tokens: map[string]IAMToken{"": ok}},
		"brace":       {Tokens: map[string]IAMToken{"a{": ok}},
		"control":     {Tokens: map[string]IAMToken{"a\tb": ok}},
		"no audience": {Tokens: map[string]IAMToken{"a": {TokenType: TokenTypeJWTSVID}}},
		"audience LF": {Tokens: map[string]IAMToken{"a": {Audience: "x\ny", TokenType: TokenTypeJWTSVID}}},
		"other type":  {Tokens: map[string]IAMToken{"a": {Audience: "x", TokenType: "jwt"}}},
	} {
		if err := iam.Validate(); err == nil || KindOf(err) != KindInvalid {
			t.Errorf("%s: %v", what, err)
		}
	}
}
