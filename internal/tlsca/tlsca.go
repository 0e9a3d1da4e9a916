// Package tlsca makes the TLS material for serving sandbox URLs over
// HTTPS on a machine with no public certificate: a local certificate
// authority, kept in the state directory, and a wildcard certificate for
// *.<domain> signed by it. Clients trust the CA file (for Node, with
// NODE_EXTRA_CA_CERTS); nothing here touches the system trust store.
// The same CA signs, through an Authority, the certificates the egress
// gateway presents to sandboxes for the hosts whose requests it rewrites.
//
// Files in Dir: ca.pem and ca-key.pem (made once, valid ten years),
// server.pem and server-key.pem (remade when the domain changes or the
// certificate nears its end).
package tlsca

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Validity of what Ensure makes. Leaf certificates stay under the 398 days
// clients accept, and are renewed a month before they end.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 397 * 24 * time.Hour
	leafRenew    = 30 * 24 * time.Hour
)

// Files are the paths of the material Ensure keeps.
type Files struct {
	CACert, CAKey, Cert, Key string
}

func filesIn(dir string) Files {
	return Files{
		CACert: filepath.Join(dir, "ca.pem"),
		CAKey:  filepath.Join(dir, "ca-key.pem"),
		Cert:   filepath.Join(dir, "server.pem"),
		Key:    filepath.Join(dir, "server-key.pem"),
	}
}

// Ensure makes sure dir holds a CA and a server certificate for domain,
// *.domain, localhost, 127.0.0.1 and ::1, creating or renewing what is
// missing, and returns the server certificate and the files' paths. The
// domain needs at least two labels ("warren.localhost", not "localhost"):
// clients refuse wildcards directly under a top-level name.
func Ensure(dir, domain string, now time.Time) (tls.Certificate, Files, error) {
	domain = strings.ToLower(strings.TrimSuffix(hostOnly(domain), "."))
	if strings.Count(domain, ".") < 1 {
		return tls.Certificate{}, Files{}, fmt.Errorf("tlsca: domain %q needs at least two labels for a wildcard certificate", domain)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, Files{}, fmt.Errorf("tlsca: %w", err)
	}
	files := filesIn(dir)
	ca, caKey, err := loadOrCreateCA(files, now)
	if err != nil {
		return tls.Certificate{}, Files{}, err
	}
	names := []string{"*." + domain, domain, "localhost"}
	if cert, err := tls.LoadX509KeyPair(files.Cert, files.Key); err == nil && leafUsable(cert, ca, names, now) {
		return cert, files, nil
	}
	cert, err := issueLeaf(files, ca, caKey, names, now)
	return cert, files, err
}

func loadOrCreateCA(files Files, now time.Time) (*x509.Certificate, crypto.Signer, error) {
	if kp, err := tls.LoadX509KeyPair(files.CACert, files.CAKey); err == nil {
		signer, ok := kp.PrivateKey.(crypto.Signer)
		if ok && kp.Leaf != nil && now.Before(kp.Leaf.NotAfter) {
			return kp.Leaf, signer, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("tlsca: loading the CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"Warren"}, CommonName: "Warren local CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePair(files.CACert, files.CAKey, der, key); err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

// leafUsable reports whether cert was issued by ca for exactly names and
// is not about to expire.
func leafUsable(cert tls.Certificate, ca *x509.Certificate, names []string, now time.Time) bool {
	leaf := cert.Leaf
	if leaf == nil || now.Add(leafRenew).After(leaf.NotAfter) || !bytes.Equal(leaf.RawIssuer, ca.RawSubject) {
		return false
	}
	if leaf.CheckSignatureFrom(ca) != nil {
		return false
	}
	return slices.Equal(leaf.DNSNames, names)
}

func issueLeaf(files Files, ca *x509.Certificate, caKey crypto.Signer, names []string, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{Organization: []string{"Warren"}, CommonName: names[0]},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsca: signing the server certificate: %w", err)
	}
	if err := writePair(files.Cert, files.Key, der, key); err != nil {
		return tls.Certificate{}, err
	}
	return tls.LoadX509KeyPair(files.Cert, files.Key)
}

// writePair writes a certificate (world-readable: clients need the CA's)
// and its private key (owner only).
func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("tlsca: %w", err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("tlsca: %w", err)
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) // crypto/rand does not fail
	return n
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// Authority is Warren's CA held in memory, issuing certificates for the
// names and addresses the egress gateway intercepts: the TLS a sandbox
// opens to a host with header rules ends at the gateway with one of
// these, which sandboxes trust because the CA is in their trust store.
// Leaves are cached per name; its methods are safe for concurrent use.
type Authority struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
	now  func() time.Time

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// maxLeaves bounds the cache of issued certificates; past it the cache
// starts over (a sandbox naming endless hosts costs a signature each).
const maxLeaves = 4096

// LoadAuthority loads the CA in dir (ca.pem, ca-key.pem), creating it when
// missing: the same CA Ensure keeps, so one server has one CA.
func LoadAuthority(dir string, now func() time.Time) (*Authority, error) {
	if now == nil {
		now = time.Now
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tlsca: %w", err)
	}
	files := filesIn(dir)
	ca, key, err := loadOrCreateCA(files, now())
	if err != nil {
		return nil, err
	}
	return &Authority{
		cert:   ca,
		key:    key,
		pem:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
		now:    now,
		leaves: map[string]*tls.Certificate{},
	}, nil
}

// CertPEM is the CA certificate, PEM-encoded: what sandboxes must trust.
func (a *Authority) CertPEM() []byte { return slices.Clone(a.pem) }

// Leaf returns a certificate for host, a DNS name or an IP address,
// signed by the CA, from the cache when one is there and not near its end.
func (a *Authority) Leaf(host string) (*tls.Certificate, error) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" {
		return nil, errors.New("tlsca: a certificate needs a name or an address")
	}
	now := a.now()
	a.mu.Lock()
	if c, ok := a.leaves[host]; ok && now.Add(leafRenew).Before(c.Leaf.NotAfter) {
		a.mu.Unlock()
		return c, nil
	}
	a.mu.Unlock()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{Organization: []string{"Warren"}, CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, fmt.Errorf("tlsca: signing a certificate for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: key, Leaf: leaf}
	a.mu.Lock()
	if len(a.leaves) >= maxLeaves {
		clear(a.leaves)
	}
	a.leaves[host] = c
	a.mu.Unlock()
	return c, nil
}

// KeyPEM is the CA's private key, PEM-encoded (PKCS #8): for a node agent
// of the Kubernetes engine, whose egress gateway issues the certificates
// of its node's sandboxes with it (ParseAuthority).
func (a *Authority) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(a.key)
	if err != nil {
		return nil, fmt.Errorf("tlsca: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseAuthority is the Authority of a CA certificate and key given as PEM
// (CertPEM, KeyPEM): what a node agent is sent.
func ParseAuthority(certPEM, keyPEM []byte, now func() time.Time) (*Authority, error) {
	if now == nil {
		now = time.Now
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tlsca: %w", err)
	}
	signer, ok := kp.PrivateKey.(crypto.Signer)
	if !ok || kp.Leaf == nil || !kp.Leaf.IsCA {
		return nil, errors.New("tlsca: not a CA certificate and its signing key")
	}
	return &Authority{
		cert:   kp.Leaf,
		key:    signer,
		pem:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.Leaf.Raw}),
		now:    now,
		leaves: map[string]*tls.Certificate{},
	}, nil
}
