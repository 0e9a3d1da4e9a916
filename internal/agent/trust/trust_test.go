package trust

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/tlsca"
)

func caPEM(t *testing.T) []byte {
	t.Helper()
	ca, err := tlsca.LoadAuthority(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM()
}

func TestInstall(t *testing.T) {
	certs, err := Parse(caPEM(t))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	debian := filepath.Join(root, "etc/ssl/certs/ca-certificates.crt")
	os.MkdirAll(filepath.Dir(debian), 0o755)
	os.WriteFile(debian, []byte("-----BEGIN CERTIFICATE-----\nsystem\n-----END CERTIFICATE-----"), 0o644)
	// Alpine's cert.pem is a link to the same bundle: written once.
	os.Symlink("certs/ca-certificates.crt", filepath.Join(root, "etc/ssl/cert.pem"))
	for range 2 { // a second init (resume) adds nothing
		env, err := Install(root, certs)
		if err != nil {
			t.Fatal(err)
		}
		if env["SSL_CERT_FILE"] != "/etc/ssl/certs/ca-certificates.crt" || env["REQUESTS_CA_BUNDLE"] != env["SSL_CERT_FILE"] || env["NODE_EXTRA_CA_CERTS"] != "/"+AnchorFile {
			t.Errorf("env = %v", env)
		}
	}
	got, _ := os.ReadFile(debian)
	if n := bytes.Count(got, certs); n != 1 || !strings.HasPrefix(string(got), "-----BEGIN CERTIFICATE-----\nsystem\n-----END CERTIFICATE-----\n") {
		t.Errorf("bundle holds the CA %d times:\n%s", n, got)
	}
	if a, _ := os.ReadFile(filepath.Join(root, AnchorFile)); !bytes.Equal(a, certs) {
		t.Errorf("anchor = %q", a)
	}

	// An image without any bundle gets one.
	bare := t.TempDir()
	env, err := Install(bare, certs)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(bare, env["SSL_CERT_FILE"])); !bytes.Equal(b, certs) {
		t.Errorf("made bundle = %q", b)
	}
}

func TestParse(t *testing.T) {
	ca := caPEM(t)
	two, err := Parse(append(append([]byte("\n"), ca...), ca...))
	if err != nil || bytes.Count(two, []byte("BEGIN CERTIFICATE")) != 2 {
		t.Errorf("two certificates: %v", err)
	}
	for _, bad := range []string{"", "junk", string(ca) + "junk", "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("junk"))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := Parse(b)
		if err != nil {
			return
		}
		// What it accepts it accepts again unchanged.
		again, err := Parse(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("re-parse: %v", err)
		}
	})
}
