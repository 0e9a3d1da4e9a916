package nodeagent

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/warrenhq/warren/internal/egress"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/tlsca"
)

// EgressTLS is what a node's gateway intercepts the TLS of an instance's
// sandboxes with: the CA they trust (its certificate and key, PEM), and
// the roots it verifies the real hosts with beside the system's (PEM,
// the control plane's --egress-trust-ca).
type EgressTLS struct {
	CACert string `json:"caCert"`
	CAKey  string `json:"caKey"`
	Roots  string `json:"roots,omitempty"`
}

// Resolution is what a placeholder of a sandbox's header rules resolves
// to, as the control plane resolved it when it sent the rules: a value,
// or why it does not resolve (shown to the sandbox's client, never a
// value). The control plane sends them again whenever a value changes
// (a secret updated or deleted, a workload token renewed).
type Resolution struct {
	Value   string `json:"value,omitempty"`
	Refusal string `json:"refusal,omitempty"`
}

// resolved is one sandbox's placeholders, by their text: the gateway's
// Expander for that sandbox.
type resolved map[string]Resolution

var _ egress.Expander = resolved(nil)

func (r resolved) Expand(_ context.Context, _, _, value string) (string, error) {
	return sandbox.ExpandPlaceholders(value, func(p sandbox.Placeholder) (string, error) {
		res, ok := r[p.Text]
		switch {
		case !ok:
			return "", fmt.Errorf("placeholder %s does not resolve: the control plane did not send it to this node", p.Text)
		case res.Refusal != "":
			return "", errors.New(res.Refusal)
		}
		return res.Value, nil
	})
}

// instanceTLS is an instance's EgressTLS, parsed; kept while the instance
// sends the same, so that the certificates issued stay cached.
type instanceTLS struct {
	sum   [32]byte
	ca    *tlsca.Authority
	roots *x509.CertPool
}

// parseTLS parses t, or returns prev when t is what prev was parsed from.
func parseTLS(t *EgressTLS, prev *instanceTLS) (*instanceTLS, error) {
	if t == nil {
		return nil, nil
	}
	sum := sha256.Sum256([]byte(t.CACert + "\x00" + t.CAKey + "\x00" + t.Roots))
	if prev != nil && prev.sum == sum {
		return prev, nil
	}
	ca, err := tlsca.ParseAuthority([]byte(t.CACert), []byte(t.CAKey), nil)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "the egress CA: %v", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if t.Roots != "" && !roots.AppendCertsFromPEM([]byte(t.Roots)) {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "the egress roots hold no PEM certificate")
	}
	return &instanceTLS{sum: sum, ca: ca, roots: roots}, nil
}
