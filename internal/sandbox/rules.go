package sandbox

import (
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/net/http/httpguts"
)

// Network rules (network.rules) set headers on a sandbox's outgoing
// HTTP(S) requests to a host. Their values may hold placeholders that the
// egress gateway resolves at send time, outside the sandbox:
// ${e2b.secrets.NAME} (a secret of the sandbox's team) and
// ${e2b.identity.tokens.NAME} (a workload token minted for the sandbox
// from its iam.tokens). This file parses and checks both; resolving them
// is internal/secrets', applying them internal/egress'.

// Limits on rules, so that a sandbox record and each request's work stay
// small. E2B states none; these are far above any real use.
const (
	maxRuleKeys        = 64
	maxRulesPerKey     = 16
	maxHeadersPerRule  = 64
	maxHeaderValueSize = 16 << 10
	maxIAMTokens       = 16
	maxIAMNameSize     = 128
	maxAudienceSize    = 1024
)

// TokenTypeJWTSVID is the one workload token type: a JWT whose sub is a
// SPIFFE ID (the JWT-SVID profile).
const TokenTypeJWTSVID = "JWT-SVID"

// IAM is a sandbox's workload identity configuration (E2B's SandboxIam):
// named token definitions, which its rules reach as
// ${e2b.identity.tokens.NAME}. Set at create; forks keep it.
type IAM struct {
	Tokens map[string]IAMToken // nil = no workload identity
}

// IAMToken defines the tokens minted for one name.
type IAMToken struct {
	Audience  string // the tokens' aud, exactly as the client gave it
	TokenType string // TokenTypeJWTSVID
}

// Validate checks token names, audiences and types.
func (iam IAM) Validate() error {
	if len(iam.Tokens) > maxIAMTokens {
		return Errorf(KindInvalid, "iam.tokens has %d tokens; at most %d are allowed", len(iam.Tokens), maxIAMTokens)
	}
	for name, t := range iam.Tokens {
		if err := validTokenName(name); err != nil {
			return err
		}
		if t.Audience == "" || len(t.Audience) > maxAudienceSize || strings.IndexFunc(t.Audience, unicode.IsControl) >= 0 {
			return Errorf(KindInvalid, "iam.tokens.%s.audience must be 1 to %d bytes without control characters", name, maxAudienceSize)
		}
		if t.TokenType != TokenTypeJWTSVID {
			return Errorf(KindInvalid, "iam.tokens.%s.tokenType %q is not supported: the only token type is %s", name, t.TokenType, TokenTypeJWTSVID)
		}
	}
	return nil
}

// validTokenName checks a token name as E2B's SDK does: it goes into a
// placeholder, so it cannot be empty or hold '{', '}' or control
// characters.
func validTokenName(name string) error {
	if name == "" || len(name) > maxIAMNameSize || strings.ContainsAny(name, "{}") || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return Errorf(KindInvalid, "iam token name %q is not usable: it must be 1 to %d bytes without '{', '}' or control characters", name, maxIAMNameSize)
	}
	return nil
}

// PlaceholderKind says what a placeholder resolves to.
type PlaceholderKind int

const (
	PlaceholderSecret PlaceholderKind = iota + 1 // ${e2b.secrets.NAME}
	PlaceholderToken                             // ${e2b.identity.tokens.NAME}
)

// Placeholder is one ${e2b.…} reference in a header value.
type Placeholder struct {
	Kind PlaceholderKind
	Name string // the secret's or token's name as written
	Text string // the whole placeholder, e.g. "${e2b.secrets.openai}"
}

const (
	placeholderOpen = "${e2b."
	secretPrefix    = "secrets."
	tokenPrefix     = "identity.tokens."
)

var secretName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

// ValidateSecretName checks a secret name against E2B's pattern
// ^[a-zA-Z0-9_-]+$, at most 128 characters. The prefix sec_ is kept for
// secret IDs, so that a name never reads as one.
func ValidateSecretName(name string) error {
	if !secretName.MatchString(name) {
		return Errorf(KindInvalid, "invalid secret name %q: must match ^[a-zA-Z0-9_-]+$ and be 1 to 128 characters", name)
	}
	if strings.HasPrefix(strings.ToLower(name), SecretIDPrefix) {
		return Errorf(KindInvalid, "invalid secret name %q: the prefix %s is reserved for secret IDs", name, SecretIDPrefix)
	}
	return nil
}

// ParsePlaceholders returns the placeholders in a header value, in order.
// Every "${e2b." starts one, which must be ${e2b.secrets.NAME} with a
// valid secret name or ${e2b.identity.tokens.NAME} with a valid token
// name; anything else is an error, so that a typo fails at create instead
// of going out as literal text. Other "${…}" text is literal.
func ParsePlaceholders(value string) ([]Placeholder, error) {
	var out []Placeholder
	_, err := ExpandPlaceholders(value, func(p Placeholder) (string, error) {
		out = append(out, p)
		return "", nil
	})
	return out, err
}

// ExpandPlaceholders returns value with each placeholder replaced by what
// resolve returns for it; it stops at the first error, of the syntax
// (KindInvalid) or of resolve.
func ExpandPlaceholders(value string, resolve func(Placeholder) (string, error)) (string, error) {
	if !strings.Contains(value, placeholderOpen) {
		return value, nil
	}
	var b strings.Builder
	rest := value
	for {
		i := strings.Index(rest, placeholderOpen)
		if i < 0 {
			b.WriteString(rest)
			return b.String(), nil
		}
		b.WriteString(rest[:i])
		rest = rest[i:]
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return "", Errorf(KindInvalid, "placeholder %q is not closed with '}'", truncate(rest, 64))
		}
		p, err := parsePlaceholder(rest[:end+1])
		if err != nil {
			return "", err
		}
		v, err := resolve(p)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
		rest = rest[end+1:]
	}
}

// parsePlaceholder parses text, "${e2b." … "}" with no '}' before the end.
func parsePlaceholder(text string) (Placeholder, error) {
	inner := strings.TrimSuffix(strings.TrimPrefix(text, placeholderOpen), "}")
	if name, ok := strings.CutPrefix(inner, secretPrefix); ok {
		if !secretName.MatchString(name) {
			return Placeholder{}, Errorf(KindInvalid, "placeholder %q names no possible secret: a secret name matches ^[a-zA-Z0-9_-]+$", text)
		}
		return Placeholder{Kind: PlaceholderSecret, Name: name, Text: text}, nil
	}
	if name, ok := strings.CutPrefix(inner, tokenPrefix); ok {
		if validTokenName(name) != nil {
			return Placeholder{}, Errorf(KindInvalid, "placeholder %q names no possible token: a token name is not empty and has no '{' or control characters", text)
		}
		return Placeholder{Kind: PlaceholderToken, Name: name, Text: text}, nil
	}
	return Placeholder{}, Errorf(KindInvalid, "placeholder %q is neither ${e2b.secrets.NAME} nor ${e2b.identity.tokens.NAME}", text)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// RuleKey is a parsed key of network.rules: the hosts its rules apply to.
type RuleKey struct {
	// Name is an exact host name, or with Wildcard the suffix every name
	// under which matches (without "*."; the suffix itself does not).
	// Lowercase, no trailing dot. "" for an IP or CIDR key.
	Name     string
	Wildcard bool
	// Prefix is the addresses of an IP (a one-address prefix) or CIDR
	// key, masked, IPv4 unmapped; invalid for a name key.
	Prefix netip.Prefix
}

// String is the key's normal form, as stored.
func (k RuleKey) String() string {
	switch {
	case k.Prefix.IsValid() && k.Prefix.IsSingleIP():
		return k.Prefix.Addr().String()
	case k.Prefix.IsValid():
		return k.Prefix.String()
	case k.Wildcard:
		return "*." + k.Name
	}
	return k.Name
}

// ParseRuleKey parses a key of network.rules: an exact DNS name
// ("api.example.com"), a leading wildcard over a suffix of one label or
// more ("*.example.com", "*.com"; not a bare "*"), an IP address or a
// CIDR prefix. Case and a trailing dot do not matter.
func ParseRuleKey(s string) (RuleKey, error) {
	if p, err := ParseEgressTarget(s); err == nil {
		return RuleKey{Prefix: p}, nil
	}
	d := strings.ToLower(strings.TrimSuffix(s, "."))
	if suffix, ok := strings.CutPrefix(d, "*."); ok {
		if hostLabels(suffix) {
			return RuleKey{Name: suffix, Wildcard: true}, nil
		}
	} else if name, ok := domainPattern(d); ok {
		return RuleKey{Name: name}, nil
	}
	return RuleKey{}, Errorf(KindInvalid, "network.rules key '%s' is not a domain name, a *.suffix wildcard, an IP address or a CIDR", s)
}

// NormalizeRules checks network.rules and returns them with their keys
// in normal form (RuleKey.String). Each key is a valid RuleKey, named
// once; each header name a token of RFC 9110 that is not about the
// connection or the message's framing (Host, Content-Length, Connection,
// ...: the gateway owns those); each value a valid field value whose
// placeholders parse. Whether they resolve is not checked here.
func NormalizeRules(rules map[string][]NetworkRule) (map[string][]NetworkRule, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	if len(rules) > maxRuleKeys {
		return nil, Errorf(KindInvalid, "network.rules has %d hosts; at most %d are allowed", len(rules), maxRuleKeys)
	}
	out := make(map[string][]NetworkRule, len(rules))
	// Walk the keys in order so that which of two spellings of one key
	// is reported does not depend on map order.
	keys := make([]string, 0, len(rules))
	for k := range rules {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		k, err := ParseRuleKey(key)
		if err != nil {
			return nil, err
		}
		norm := k.String()
		if _, dup := out[norm]; dup {
			return nil, Errorf(KindInvalid, "network.rules names host '%s' twice (keys are matched without regard to case)", norm)
		}
		list := rules[key]
		if len(list) > maxRulesPerKey {
			return nil, Errorf(KindInvalid, "network.rules['%s'] has %d rules; at most %d are allowed", key, len(list), maxRulesPerKey)
		}
		for _, r := range list {
			if err := r.validate(key); err != nil {
				return nil, err
			}
		}
		out[norm] = list
	}
	return out, nil
}

// reservedHeaders are headers a rule cannot set: the gateway decides
// where a request goes and how it is framed.
var reservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Te", "Trailer", "Keep-Alive"}

func (r NetworkRule) validate(key string) error {
	if len(r.Headers) > maxHeadersPerRule {
		return Errorf(KindInvalid, "a rule of network.rules['%s'] sets %d headers; at most %d are allowed", key, len(r.Headers), maxHeadersPerRule)
	}
	for name, v := range r.Headers {
		if !httpguts.ValidHeaderFieldName(name) {
			return Errorf(KindInvalid, "network.rules['%s']: %q is not a valid header name", key, name)
		}
		canon := http.CanonicalHeaderKey(name)
		if slices.Contains(reservedHeaders, canon) || strings.HasPrefix(canon, "Proxy-") {
			return Errorf(KindInvalid, "network.rules['%s']: the header %s cannot be set by a rule", key, canon)
		}
		if len(v) > maxHeaderValueSize || !httpguts.ValidHeaderFieldValue(v) {
			return Errorf(KindInvalid, "network.rules['%s']: the value of header %s must be at most %d bytes without CR, LF or other control characters", key, canon, maxHeaderValueSize)
		}
		if _, err := ParsePlaceholders(v); err != nil {
			return Errorf(KindInvalid, "network.rules['%s'], header %s: %s", key, canon, Message(err))
		}
	}
	return nil
}

// RulePlaceholders returns every placeholder in the rules' header values;
// the rules must have passed NormalizeRules.
func RulePlaceholders(rules map[string][]NetworkRule) []Placeholder {
	var out []Placeholder
	for _, list := range rules {
		for _, r := range list {
			for _, v := range r.Headers {
				ps, _ := ParsePlaceholders(v)
				out = append(out, ps...)
			}
		}
	}
	return out
}

// CheckTokens reports the first token placeholder of rules whose name
// iam does not define: it could never resolve.
func CheckTokens(rules map[string][]NetworkRule, iam IAM) error {
	for _, p := range RulePlaceholders(rules) {
		if _, ok := iam.Tokens[p.Name]; p.Kind == PlaceholderToken && !ok {
			return Errorf(KindInvalid, "network.rules: placeholder %s names no token of the sandbox's iam.tokens", p.Text)
		}
	}
	return nil
}

// hostLabels reports whether host is dot-separated labels of lowercase
// letters, digits and hyphens, 1 to 63 characters each and 253 in all, not
// starting or ending with a hyphen, the last not all digits.
func hostLabels(host string) bool {
	if host == "" || len(host) > 253 {
		return false
	}
	if tld := host[strings.LastIndexByte(host, '.')+1:]; strings.Trim(tld, "0123456789") == "" {
		return false
	}
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// ValidateMaskRequestHost checks network.maskRequestHost: the Host header
// the proxy sends to a sandbox's port, with ${PORT} standing for the port
// number. With ${PORT} replaced it must be a host name, an IPv4 address or
// a bracketed IPv6 address, with an optional :port.
func ValidateMaskRequestHost(mask string) error {
	h := strings.ReplaceAll(mask, "${PORT}", "80")
	host, ok := h, len(mask) <= 255
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.HasSuffix(h, "]") {
		host, ok = h[:i], ok && validPort(h[i+1:])
	}
	if v6, found := strings.CutPrefix(host, "["); found {
		a, err := netip.ParseAddr(strings.TrimSuffix(v6, "]"))
		ok = ok && strings.HasSuffix(v6, "]") && err == nil && a.Is6() && a.Zone() == ""
	} else if _, err := netip.ParseAddr(host); err == nil {
		ok = ok && !strings.Contains(host, ":")
	} else {
		ok = ok && nameLabels(host)
	}
	if !ok {
		return Errorf(KindInvalid, "network.maskRequestHost %q is not a host[:port] (a name, an IPv4 address or a bracketed IPv6 one; ${PORT} stands for the port)", mask)
	}
	return nil
}

// nameLabels is hostLabels for a Host header: underscores allowed, one
// label allowed ("localhost"), digits-only last label allowed only when
// the name is not an address (checked by the caller first).
func nameLabels(host string) bool {
	if host == "" || len(host) > 253 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(host, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// validPort reports whether p is a decimal port 1-65535.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && len(p) <= 5 && p[0] != '+' && p[0] != '-' && n >= 1 && n <= 65535
}
