package nodeagent

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"time"
)

// The node agent serves HTTPS with a key derived from the token the
// control plane and the node agents share (the Secret warren-node-token):
// an Ed25519 key whose seed is an HMAC of the token, in a self-signed
// certificate. The control plane derives the same public key and accepts
// no other, so its requests (egress rules, which may carry a sandbox's
// settings, and the token itself) travel encrypted to a peer that proved
// it holds the token, with no certificate to issue, distribute or renew,
// and no permission beyond reading that Secret. Whoever holds the token
// is a node agent to the control plane, as it already was the control
// plane to every node agent: the token is the cluster's one secret here.

// tlsKey derives the node agents' TLS key from the token.
func tlsKey(token string) ed25519.PrivateKey {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("warren node agent TLS key v1"))
	return ed25519.NewKeyFromSeed(m.Sum(nil))
}

// ServerTLS is the node agent's TLS configuration for token.
func ServerTLS(token string) (*tls.Config, error) {
	key := tlsKey(token)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "warren-node"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS13,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, nil
}

// clientTLS accepts only a node agent holding token's key.
func clientTLS(token string) *tls.Config {
	want := tlsKey(token).Public().(ed25519.PublicKey)
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The chain is not verified against roots: the peer's key is
		// checked below, which pins it exactly.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the node agent presented no certificate")
			}
			got, ok := cs.PeerCertificates[0].PublicKey.(ed25519.PublicKey)
			if !ok || !bytes.Equal(got, want) {
				return errors.New("the node agent's TLS key is not the one of the shared token")
			}
			return nil
		},
	}
}
