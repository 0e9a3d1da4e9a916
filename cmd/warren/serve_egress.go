package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/secrets"
	"github.com/warrenhq/warren/internal/tlsca"
)

// egressTLS is what the egress gateway intercepts TLS with: Warren's CA in
// <state-dir>/tls (the one --tls-addr uses too), which every sandbox
// trusts, and the roots it verifies the real hosts with: the system's,
// plus the certificates of the --egress-trust-ca files (private CAs, or a
// test's self-signed host).
func egressTLS(stateDir string, trustFiles []string) (*tlsca.Authority, *x509.CertPool, error) {
	ca, err := tlsca.LoadAuthority(filepath.Join(stateDir, "tls"), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("egress gateway CA: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	for _, f := range trustFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, usageError{fmt.Sprintf("--egress-trust-ca: %v", err)}
		}
		if !roots.AppendCertsFromPEM(b) {
			return nil, nil, usageError{fmt.Sprintf("--egress-trust-ca: %s holds no PEM certificate", f)}
		}
	}
	return ca, roots, nil
}

// parseFileList splits a comma-separated list of paths.
func parseFileList(list string) []string {
	var out []string
	for f := range strings.SplitSeq(list, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
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
