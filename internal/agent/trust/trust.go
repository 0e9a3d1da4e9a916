// Package trust installs CA certificates into a container's trust store,
// for the agent's POST /init caBundle: Warren's CA, whose certificates
// the egress gateway presents for the hosts whose requests it rewrites,
// so that curl, Python, Node and the rest verify them with no flag.
//
// It appends the certificates to every system bundle the image has (the
// Debian, Red Hat and Alpine paths), writes them where
// update-ca-certificates would pick them up, and says which environment
// variables point tools with bundles of their own (Node, Python's
// requests) at them. It does not run update-ca-certificates: appending is
// what that tool would do, without its seconds of rehashing.
package trust

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Paths inside the container, below its root.
const (
	// AnchorFile is where the certificates are written on their own.
	AnchorFile = "usr/local/share/ca-certificates/warren-ca.crt"
	// defaultBundle is made when the image has no bundle at all.
	defaultBundle = "etc/ssl/certs/ca-certificates.crt"
)

// bundles are the system CA bundles of the common distributions.
var bundles = []string{
	"etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Alpine
	"etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL
	"etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // RHEL's extracted bundle
	"etc/ssl/cert.pem",                                 // Alpine, and OpenSSL's own default
}

// Parse checks that b is one or more PEM certificates and nothing else,
// and returns them re-encoded, one block after another.
func Parse(b []byte) ([]byte, error) {
	var out bytes.Buffer
	rest := bytes.TrimSpace(b)
	for len(rest) > 0 {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("caBundle holds something other than PEM certificates")
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("caBundle holds a PEM %q block; only certificates go there", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return nil, fmt.Errorf("caBundle holds a certificate that does not parse: %w", err)
		}
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes})
		rest = bytes.TrimSpace(rest)
	}
	if out.Len() == 0 {
		return nil, errors.New("caBundle holds no certificate")
	}
	return out.Bytes(), nil
}

// Install adds certs (PEM, as Parse returns them) to the trust store under
// root ("/" in a container), once: a bundle that holds them already is
// left alone. It returns the environment variables that point tools at
// the store.
func Install(root string, certs []byte) (map[string]string, error) {
	anchor := filepath.Join(root, AnchorFile)
	if err := os.MkdirAll(filepath.Dir(anchor), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(anchor, certs, 0o644); err != nil {
		return nil, err
	}
	bundle := ""
	done := map[string]bool{}
	for _, rel := range bundles {
		p := filepath.Join(root, rel)
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue // no such bundle here
		}
		if fi, err := os.Stat(real); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if bundle == "" {
			bundle = "/" + rel
		}
		if done[real] {
			continue
		}
		done[real] = true
		if err := appendOnce(real, certs); err != nil {
			return nil, fmt.Errorf("adding the CA to %s: %w", p, err)
		}
	}
	if bundle == "" {
		p := filepath.Join(root, defaultBundle)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, certs, 0o644); err != nil {
			return nil, err
		}
		bundle = "/" + defaultBundle
	}
	return map[string]string{
		// OpenSSL (Python's ssl, Ruby, PHP), Go and curl read these.
		"SSL_CERT_FILE":  bundle,
		"CURL_CA_BUNDLE": bundle,
		// Python's requests and pip ship their own bundle.
		"REQUESTS_CA_BUNDLE": bundle,
		// Node keeps its built-in roots and adds these.
		"NODE_EXTRA_CA_CERTS": "/" + AnchorFile,
	}, nil
}

// appendOnce appends certs to the file at path unless it holds them.
func appendOnce(path string, certs []byte) error {
	have, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if bytes.Contains(have, certs) {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	var sep []byte
	if len(have) > 0 && have[len(have)-1] != '\n' {
		sep = []byte("\n")
	}
	_, err = f.Write(append(sep, certs...))
	return errors.Join(err, f.Close())
}
