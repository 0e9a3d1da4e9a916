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

// kubeEgressRoots is the PEM of the --egress-trust-ca files, which the
// node agents' gateways trust beside the system's on the Kubernetes
// engine. Their CA is the firewall's own (kubernetes.Firewall.LoadCA),
// loaded by the server once the replicas' shared files are pulled.
func kubeEgressRoots(trustFiles []string) (string, error) {
	var roots strings.Builder
	for _, f := range trustFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", usageError{fmt.Sprintf("--egress-trust-ca: %v", err)}
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return "", usageError{fmt.Sprintf("--egress-trust-ca: %s holds no PEM certificate", f)}
		}
		roots.Write(b)
		roots.WriteString("\n")
	}
	return roots.String(), nil
}
