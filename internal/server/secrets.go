package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/warrenhq/warren/internal/identity"
	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/secrets"
	"github.com/warrenhq/warren/internal/store"
)

// openSecrets makes the secrets service and the workload identity issuer:
// the sealing key is SecretsKeyFile, or <state-dir>/secrets.key made
// on first start; the issuer is OIDCIssuer, or apiURL, with its keys
// in <state-dir>/oidc-keys.json, their rotations shared through shared
// when several replicas share the store (nil: one server). changed, when
// not nil, is told of every change of a team's secrets.
func openSecrets(cfg Config, st store.Store, apiURL string, changed func(context.Context, string), shared *sharedState) (*secrets.Service, *identity.Issuer, error) {
	issuer := cfg.OIDCIssuer
	if issuer == "" {
		issuer = apiURL
	}
	idc := identity.Config{Issuer: issuer, KeyFile: filepath.Join(cfg.StateDir, keysFile)}
	if shared != nil {
		idc.Shared = identityKeys{shared}
	}
	iss, err := identity.New(idc)
	if err != nil {
		return nil, nil, fmt.Errorf("workload identity: %w", err)
	}
	keyFile, create := cfg.SecretsKeyFile, false
	if keyFile == "" {
		keyFile, create = filepath.Join(cfg.StateDir, "secrets.key"), true
	}
	sec, err := secrets.New(secrets.Config{Store: st, KeyFile: keyFile, CreateKey: create, Sandboxes: st, Tokens: iss, Changed: changed})
	if err != nil {
		return nil, nil, err
	}
	return sec, iss, nil
}

// secretsWatcher is a firewall that holds resolved secret values (the
// Kubernetes engine's), told of every change of a team's secrets.
type secretsWatcher interface {
	SecretsChanged(ctx context.Context, team string) error
}

// secretsChanged tells fw of a team's changed secrets, when it holds
// values; nil otherwise. A failure is logged: the node that missed the
// change gets it at the next reconcile.
func secretsChanged(fw any, log *slog.Logger) func(context.Context, string) {
	w, ok := fw.(secretsWatcher)
	if !ok {
		return nil
	}
	return func(ctx context.Context, team string) {
		if err := w.SecretsChanged(ctx, team); err != nil {
			log.ErrorContext(ctx, "cannot send the nodes a team's changed secrets; they get them at the next reconcile", logkey.Team, team, "err", err)
		}
	}
}

// gatewaySecrets is the egress gateway's Expander: the secrets service,
// whose unresolved placeholders the sandbox's client is told of, while
// any other failure (the store's) is logged and told only as a failure.
type gatewaySecrets struct {
	svc *secrets.Service
	log *slog.Logger
}

func (g gatewaySecrets) Expand(ctx context.Context, sandboxID, teamID, value string) (string, error) {
	v, err := g.svc.Expand(ctx, sandboxID, teamID, value)
	if _, unresolved := errors.AsType[*secrets.UnresolvedError](err); err == nil || unresolved {
		return v, err
	}
	g.log.Error("resolving a header's placeholders failed", logkey.Sandbox, sandboxID, "err", err)
	return "", errors.New("the server could not resolve the header's placeholders; its log says why")
}
