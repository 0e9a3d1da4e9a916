package main

import (
	"fmt"
	"path/filepath"

	"github.com/warrenhq/warren/internal/identity"
	"github.com/warrenhq/warren/internal/secrets"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

// openSecrets makes the secrets service and the workload identity issuer:
// the sealing key is --secrets-key-file, or <state-dir>/secrets.key made
// on first start; the issuer is --oidc-issuer, or apiURL, with its keys
// in <state-dir>/oidc-keys.json.
func openSecrets(cfg serveConfig, st *sqlite.DB, apiURL string) (*secrets.Service, *identity.Issuer, error) {
	issuer := cfg.OIDCIssuer
	if issuer == "" {
		issuer = apiURL
	}
	iss, err := identity.New(identity.Config{Issuer: issuer, KeyFile: filepath.Join(cfg.StateDir, "oidc-keys.json")})
	if err != nil {
		return nil, nil, fmt.Errorf("workload identity: %w", err)
	}
	keyFile, create := cfg.SecretsKeyFile, false
	if keyFile == "" {
		keyFile, create = filepath.Join(cfg.StateDir, "secrets.key"), true
	}
	sec, err := secrets.New(secrets.Config{Store: st, KeyFile: keyFile, CreateKey: create, Sandboxes: st, Tokens: iss})
	if err != nil {
		return nil, nil, err
	}
	return sec, iss, nil
}
