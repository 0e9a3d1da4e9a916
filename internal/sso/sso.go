// Package sso is the dashboard's single sign-on: an OpenID Connect
// relying party (authorization code flow with PKCE) against the
// operator's identity provider, through github.com/coreos/go-oidc and
// golang.org/x/oauth2. It owns the provider's discovery, the
// authorization URL, the code exchange, the ID token's verification
// (signature, issuer, audience, expiry, nonce) and the reading of the
// claims that name a user's teams and operator role.
//
// It does not own the browser's side of the flow (the cookie that binds
// a flow's state, nonce and verifier to the browser that started it),
// sessions, nor which teams exist: the dashboard (internal/web) does.
package sso

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/warrenhq/warren/internal/sandbox"
)

// DefaultScopes are asked for when Config.Scopes is empty.
var DefaultScopes = []string{oidc.ScopeOpenID, "email", "profile"}

// Config is the relying party's configuration, from warren serve's
// --sso-* flags.
type Config struct {
	// Issuer is the provider's issuer URL, where its discovery document
	// is (Issuer + /.well-known/openid-configuration); required.
	Issuer string
	// ClientID is the client registered at the provider; required.
	ClientID string
	// ClientSecret is the client's secret; "" = a public client, which
	// PKCE alone protects.
	ClientSecret string
	// Scopes asked for; nil = DefaultScopes. "openid" is added if left out.
	Scopes []string
	// TeamClaim names the ID token claim whose value (a string or a list
	// of strings) names the user's teams; required.
	TeamClaim string
	// TeamPrefix, if set, keeps only the values of TeamClaim that start
	// with it, less the prefix ("warren-" maps the group "warren-acme" to
	// the team "acme" and ignores other groups); "" = every value.
	TeamPrefix string
	// OperatorClaim and OperatorValue make a user the server's operator
	// when the claim's value is OperatorValue or a list holding it; ""
	// = no user is the operator through single sign-on.
	OperatorClaim string
	OperatorValue string
	// HTTPClient reaches the provider; nil = a client with a 10 s timeout.
	HTTPClient *http.Client
}

// Validate says what is missing or wrong, in terms of the flags.
func (c Config) Validate() error {
	if c.Issuer == "" {
		return errors.New("the issuer URL is required")
	}
	if u, err := url.Parse(c.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("issuer %q is not an http(s) URL", c.Issuer)
	}
	if c.ClientID == "" {
		return errors.New("the client ID is required")
	}
	if c.TeamClaim == "" {
		return errors.New("the team claim is required")
	}
	if (c.OperatorClaim == "") != (c.OperatorValue == "") {
		return errors.New("the operator claim and the operator value go together")
	}
	return nil
}

// Provider is a relying party of one identity provider. Its discovery
// document is fetched at the first login, and again after a failure, so
// a server starts while its provider is down.
type Provider struct {
	cfg    Config
	client *http.Client

	mu sync.Mutex
	op *oidc.Provider // nil until discovered; guarded by mu
}

// New returns the relying party of cfg.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = DefaultScopes
	}
	if !hasString(cfg.Scopes, oidc.ScopeOpenID) {
		cfg.Scopes = append([]string{oidc.ScopeOpenID}, cfg.Scopes...)
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Provider{cfg: cfg, client: client}, nil
}

// Flow is one login's secrets, kept by the browser that started it
// until the provider sends it back: the state that ties the callback to
// it, the nonce the ID token must carry, and PKCE's code verifier.
type Flow struct {
	State, Nonce, Verifier string
}

// NewFlow returns a login's fresh secrets.
func NewFlow() Flow {
	return Flow{State: sandbox.NewToken(), Nonce: sandbox.NewToken(), Verifier: oauth2.GenerateVerifier()}
}

// Identity is who logged in, as the ID token says.
type Identity struct {
	Subject string
	// Name is the user's email, else name, else subject: for logs and
	// pages.
	Name string
	// Teams are the values of the team claim, less TeamPrefix, in the
	// claim's order.
	Teams []string
	// Operator says the operator claim holds the operator value.
	Operator bool
}

// provider returns the discovered provider, discovering it first.
func (p *Provider) provider(ctx context.Context) (*oidc.Provider, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.op != nil {
		return p.op, nil
	}
	op, err := oidc.NewProvider(oidc.ClientContext(ctx, p.client), p.cfg.Issuer)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindUnavailable, err, "the identity provider "+p.cfg.Issuer+" cannot be reached")
	}
	p.op = op
	return op, nil
}

func (p *Provider) oauth(op *oidc.Provider, redirectURL string) *oauth2.Config {
	return &oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, Endpoint: op.Endpoint(),
		RedirectURL: redirectURL, Scopes: p.cfg.Scopes}
}

// AuthURL is where the browser logs in at the provider for f, to come
// back to redirectURL.
func (p *Provider) AuthURL(ctx context.Context, f Flow, redirectURL string) (string, error) {
	op, err := p.provider(ctx)
	if err != nil {
		return "", err
	}
	return p.oauth(op, redirectURL).AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier)), nil
}

// Finish exchanges the code the provider sent back for f's login, checks
// the ID token and returns who it names.
func (p *Provider) Finish(ctx context.Context, f Flow, code, redirectURL string) (Identity, error) {
	op, err := p.provider(ctx)
	if err != nil {
		return Identity{}, err
	}
	ctx = oidc.ClientContext(ctx, p.client)
	tok, err := p.oauth(op, redirectURL).Exchange(ctx, code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return Identity{}, sandbox.Wrap(sandbox.KindUnauthenticated, err, "the identity provider refused the login's code (try again)")
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return Identity{}, sandbox.Errorf(sandbox.KindUnauthenticated, "the identity provider sent no ID token (is the scope openid granted?)")
	}
	idt, err := op.Verifier(&oidc.Config{ClientID: p.cfg.ClientID}).Verify(ctx, raw)
	if err != nil {
		return Identity{}, sandbox.Wrap(sandbox.KindUnauthenticated, err, "the identity provider's ID token is not valid")
	}
	if idt.Nonce != f.Nonce {
		return Identity{}, sandbox.Errorf(sandbox.KindUnauthenticated, "the ID token is not this login's (its nonce differs)")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, sandbox.Wrap(sandbox.KindUnauthenticated, err, "the ID token's claims cannot be read")
	}
	return p.identity(idt.Subject, claims), nil
}

// identity reads an ID token's claims.
func (p *Provider) identity(subject string, claims map[string]any) Identity {
	id := Identity{Subject: subject, Name: subject}
	for _, k := range []string{"name", "email"} {
		if s, ok := claims[k].(string); ok && s != "" {
			id.Name = s
		}
	}
	for _, v := range claimStrings(claims[p.cfg.TeamClaim]) {
		if t, ok := strings.CutPrefix(v, p.cfg.TeamPrefix); ok && t != "" {
			id.Teams = append(id.Teams, t)
		}
	}
	if p.cfg.OperatorClaim != "" {
		id.Operator = hasString(claimStrings(claims[p.cfg.OperatorClaim]), p.cfg.OperatorValue)
	}
	return id
}

// claimStrings is a claim's value as strings: a string, or the strings
// of a list; anything else is none.
func claimStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func hasString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
