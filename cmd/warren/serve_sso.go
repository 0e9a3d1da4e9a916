package main

import (
	"os"
	"strings"

	"github.com/warrenhq/warren/internal/sso"
)

// ssoFlags are warren serve's flags of the dashboard's single sign-on
// that are no field of sso.Config as they are given.
type ssoFlags struct {
	secretFile string
	scopes     string
}

// addSSOFlags defines the --sso-* flags: the dashboard's login through
// the operator's OpenID Connect provider. (--oidc-issuer is another
// thing: the issuer of sandboxes' workload tokens.)
func addSSOFlags(e *envFlags, cfg *serveConfig) *ssoFlags {
	f := &ssoFlags{}
	c := &cfg.SSO
	e.String(&c.Issuer, "sso-issuer", "", "dashboard single sign-on: issuer URL of the OpenID Connect provider users log in at (Dex, Keycloak's realm, https://accounts.google.com); empty: no single sign-on")
	e.String(&c.ClientID, "sso-client-id", "", "dashboard single sign-on: the client ID registered at the provider")
	e.String(&f.secretFile, "sso-client-secret-file", "", "dashboard single sign-on: file holding the client's secret; empty: a public client (PKCE alone)")
	e.String(&cfg.SSORedirectURL, "sso-redirect-url", "", "dashboard single sign-on: the redirect URL registered at the provider (default: <scheme>://<host the browser used>/dashboard/api/sso/callback)")
	e.String(&f.scopes, "sso-scopes", strings.Join(sso.DefaultScopes, ","), "dashboard single sign-on: scopes asked for, comma-separated (Dex sends groups only with the groups scope)")
	e.String(&c.TeamClaim, "sso-team-claim", "groups", "dashboard single sign-on: the ID token claim (a string or a list) naming the user's team; a user must be in exactly one team of this server")
	e.String(&c.TeamPrefix, "sso-team-prefix", "", "dashboard single sign-on: keep only the team claim's values with this prefix, less the prefix (warren- maps the group warren-acme to the team acme)")
	e.String(&c.OperatorClaim, "sso-operator-claim", "", "dashboard single sign-on: the claim that makes a user the server's operator when it holds --sso-operator-value (e.g. groups)")
	e.String(&c.OperatorValue, "sso-operator-value", "", "dashboard single sign-on: the value of --sso-operator-claim (or one of its list) that makes a user the operator (e.g. warren-operators)")
	return f
}

// finish reads the secret and the scopes, and checks the flags go
// together; without --sso-issuer, no other --sso-* flag may be set.
func (f *ssoFlags) finish(cfg *serveConfig) error {
	c := &cfg.SSO
	if c.Issuer == "" {
		if c.ClientID != "" || f.secretFile != "" || c.OperatorClaim != "" || cfg.SSORedirectURL != "" {
			return usageError{"the --sso-* flags need --sso-issuer"}
		}
		return nil
	}
	if f.secretFile != "" {
		b, err := os.ReadFile(f.secretFile)
		if err != nil {
			return usageError{"--sso-client-secret-file: " + err.Error()}
		}
		c.ClientSecret = strings.TrimSpace(string(b))
		if c.ClientSecret == "" {
			return usageError{"--sso-client-secret-file: " + f.secretFile + " is empty"}
		}
	}
	for _, s := range strings.Split(f.scopes, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.Scopes = append(c.Scopes, s)
		}
	}
	if err := c.Validate(); err != nil {
		return usageError{"--sso-*: " + err.Error()}
	}
	return nil
}
