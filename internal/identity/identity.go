// Package identity makes Warren an OpenID Connect issuer of workload
// tokens: short-lived JWTs (the JWT-SVID profile: sub is a SPIFFE ID)
// that name one sandbox and its team, minted when the egress gateway
// resolves a ${e2b.identity.tokens.NAME} placeholder. A cloud's STS that
// trusts the issuer (its discovery document and JWKS, served here without
// authentication) gives the sandbox's requests credentials without a
// stored key.
//
// It owns the signing keys (ES256, in a file of the state dir) and their
// rotation: a new key is published in the JWKS an overlap before it signs,
// and a retired one stays published an overlap after, so verifiers that
// cache the JWKS never meet an unknown key. It does not decide which
// sandbox gets which token: the sandbox's iam.tokens do (internal/secrets).
package identity

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Defaults of Config.
const (
	DefaultRotateEvery = 30 * 24 * time.Hour
	DefaultOverlap     = 24 * time.Hour
	DefaultTokenTTL    = 15 * time.Minute
	// MaxTokenTTL bounds a token's life: a leaked one is worth little.
	MaxTokenTTL = time.Hour
)

// Config configures an Issuer.
type Config struct {
	// Issuer is the issuer URL (iss), where verifiers fetch
	// /.well-known/openid-configuration; required.
	Issuer string
	// KeyFile holds the signing keys; made when missing.
	KeyFile string
	// RotateEvery is how long a key signs; 0 = DefaultRotateEvery.
	RotateEvery time.Duration
	// Overlap is how long a new key is published before it signs, and a
	// retired one after; 0 = DefaultOverlap. At least the token TTL, at
	// most half of RotateEvery.
	Overlap time.Duration
	// TokenTTL is a token's life; 0 = DefaultTokenTTL, at most MaxTokenTTL.
	TokenTTL time.Duration
	Now      func() time.Time // nil = time.Now
	// Shared keeps the keys where the issuers of several control-plane
	// replicas share them, so that a token one signs verifies with the
	// keys every one publishes; nil = KeyFile alone. KeyFile starts as
	// the shared keys; a change (a rotation) goes through Shared first.
	Shared SharedKeys
}

// SharedKeys keeps the signing keys several issuers share.
type SharedKeys interface {
	// SwapKeys keeps next (the key file's form) in place of the keys
	// last read or kept, unless another issuer changed them first, and
	// returns the keys kept after: next, or theirs.
	SwapKeys(ctx context.Context, next []byte) ([]byte, error)
}

// Issuer mints workload tokens and serves their verification keys.
type Issuer struct {
	cfg         Config
	trustDomain string

	mu   sync.Mutex
	keys []signingKey // oldest first; guarded by mu
}

// New checks cfg and loads (or makes) the keys.
func New(cfg Config) (*Issuer, error) {
	if cfg.RotateEvery == 0 {
		cfg.RotateEvery = DefaultRotateEvery
	}
	if cfg.Overlap == 0 {
		cfg.Overlap = DefaultOverlap
	}
	if cfg.TokenTTL == 0 {
		cfg.TokenTTL = DefaultTokenTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.TokenTTL < 0 || cfg.TokenTTL > MaxTokenTTL:
		return nil, fmt.Errorf("workload token TTL %v: want at most %v", cfg.TokenTTL, MaxTokenTTL)
	case cfg.Overlap < cfg.TokenTTL || 2*cfg.Overlap > cfg.RotateEvery:
		return nil, fmt.Errorf("workload key overlap %v: want at least the token TTL (%v) and at most half the rotation period (%v)", cfg.Overlap, cfg.TokenTTL, cfg.RotateEvery)
	}
	iss, err := ParseIssuer(cfg.Issuer)
	if err != nil {
		return nil, err
	}
	cfg.Issuer = iss
	keys, err := loadKeys(cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	i := &Issuer{cfg: cfg, trustDomain: trustDomain(iss), keys: keys}
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, err := i.rotate(); err != nil {
		return nil, err
	}
	return i, nil
}

// ParseIssuer checks an issuer URL: http or https, a host, no query or
// fragment. It returns it without a trailing slash.
func ParseIssuer(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("OIDC issuer %q: want an http(s) URL with a host and no query, fragment or user, e.g. https://warren.example.com", s)
	}
	return strings.TrimSuffix(s, "/"), nil
}

// URL is the issuer (iss).
func (i *Issuer) URL() string { return i.cfg.Issuer }

var notTrustDomain = regexp.MustCompile(`[^a-z0-9._-]`)

// trustDomain is the SPIFFE trust domain of the issuer's tokens: its
// host name, lowercase, with what a trust domain cannot hold replaced.
func trustDomain(issuer string) string {
	u, _ := url.Parse(issuer)
	return notTrustDomain.ReplaceAllString(strings.ToLower(u.Hostname()), "-")
}

// Subject is the sub of a sandbox's tokens: a SPIFFE ID naming its team
// and itself.
func (i *Issuer) Subject(teamID, sandboxID string) string {
	return "spiffe://" + i.trustDomain + "/team/" + url.PathEscape(teamID) + "/sandbox/" + url.PathEscape(sandboxID)
}

// claims are a token's own claims beside the registered ones.
type claims struct {
	SandboxID string `json:"sandbox_id"`
	TeamID    string `json:"team_id"`
}

// Mint returns a new signed token for a sandbox with the given audience.
func (i *Issuer) Mint(ctx context.Context, audience, sandboxID, teamID string) (string, error) {
	i.mu.Lock()
	k, err := i.rotate()
	i.mu.Unlock()
	if err != nil {
		return "", err
	}
	now := i.cfg.Now()
	reg := jwt.Claims{
		Issuer:    i.cfg.Issuer,
		Subject:   i.Subject(teamID, sandboxID),
		Audience:  jwt.Audience{audience},
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		Expiry:    jwt.NewNumericDate(now.Add(i.cfg.TokenTTL)),
		ID:        rand.Text(),
	}
	tok, err := jwt.Signed(k.signer).Claims(reg).Claims(claims{SandboxID: sandboxID, TeamID: teamID}).Serialize()
	if err != nil {
		return "", fmt.Errorf("sign workload token: %w", err)
	}
	return tok, nil
}

// JWKS returns the published verification keys.
func (i *Issuer) JWKS() (jose.JSONWebKeySet, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, err := i.rotate(); err != nil {
		return jose.JSONWebKeySet{}, err
	}
	var set jose.JSONWebKeySet
	for _, k := range i.keys {
		set.Keys = append(set.Keys, k.public())
	}
	return set, nil
}
