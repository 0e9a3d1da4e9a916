package main

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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

// kubeEgressTLS is what the node agents' gateways intercept TLS with on
// the Kubernetes engine: a CA of its own in <state-dir>/egress-ca, which
// sandboxes trust, since its key is sent to the nodes that run sandboxes
// with header rules (the CA of <state-dir>/tls also signs the server's
// own certificate), and the PEM of the --egress-trust-ca files.
func kubeEgressTLS(stateDir string, trustFiles []string) (*tlsca.Authority, string, error) {
	ca, err := tlsca.LoadAuthority(filepath.Join(stateDir, "egress-ca"), nil)
	if err != nil {
		return nil, "", fmt.Errorf("egress gateway CA: %w", err)
	}
	var roots strings.Builder
	for _, f := range trustFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, "", usageError{fmt.Sprintf("--egress-trust-ca: %v", err)}
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return nil, "", usageError{fmt.Sprintf("--egress-trust-ca: %s holds no PEM certificate", f)}
		}
		roots.Write(b)
		roots.WriteString("\n")
	}
	return ca, roots.String(), nil
}
