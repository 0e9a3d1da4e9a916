package tlsca

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

func caPool(t *testing.T, files Files) *x509.CertPool {
	t.Helper()
	pemBytes, err := os.ReadFile(files.CACert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("ca.pem holds no certificate")
	}
	return pool
}

func TestEnsureServesVerifiableTLS(t *testing.T) {
	dir := t.TempDir()
	cert, files, err := Ensure(dir, "warren.localhost:3443", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()

	for _, name := range []string{"49983-isbx1.warren.localhost", "sandbox.warren.localhost", "warren.localhost", "localhost"} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool(t, files), ServerName: name}}
		resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		resp.Body.Close()
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool(t, files), ServerName: "a.b.warren.localhost"}}
	if _, err := (&http.Client{Transport: tr}).Get(srv.URL); err == nil {
		t.Error("a name two levels below the domain verified")
	}
}

func TestEnsureReusesAndRenews(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	first, _, err := Ensure(dir, "warren.localhost", now)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := Ensure(dir, "warren.localhost", now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if again.Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Error("a valid certificate was reissued")
	}
	other, files, err := Ensure(dir, "sbx.example.test", now)
	if err != nil {
		t.Fatal(err)
	}
	if other.Leaf.DNSNames[0] != "*.sbx.example.test" || other.Leaf.CheckSignatureFrom(caCert(t, files)) != nil {
		t.Errorf("new domain: names %v", other.Leaf.DNSNames)
	}
	late, _, err := Ensure(dir, "sbx.example.test", now.Add(380*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if late.Leaf.SerialNumber.Cmp(other.Leaf.SerialNumber) == 0 {
		t.Error("a certificate near its end was not renewed")
	}
	if _, _, err := Ensure(dir, "localhost", now); err == nil {
		t.Error("a single-label domain was accepted")
	}
}

func caCert(t *testing.T, files Files) *x509.Certificate {
	kp, err := tls.LoadX509KeyPair(files.CACert, files.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	return kp.Leaf
}

func TestAuthorityLeaf(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadAuthority(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(a.CertPEM()) {
		t.Fatal("CertPEM is not a certificate")
	}
	for _, host := range []string{"api.example.com", "10.0.0.5", "::1"} {
		c, err := a.Leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("%s: %v", host, err)
		}
		if again, _ := a.Leaf(strings.ToUpper(host) + "."); again != c {
			t.Errorf("%s: not cached", host)
		}
	}
	if _, err := a.Leaf(""); err == nil {
		t.Error("a certificate for no name")
	}
	// The same CA as Ensure's, kept across restarts.
	b, err := LoadAuthority(dir, nil)
	if err != nil || !bytes.Equal(a.CertPEM(), b.CertPEM()) {
		t.Errorf("reloaded a different CA: %v", err)
	}
	if _, files, err := Ensure(dir, "warren.test", time.Now()); err != nil {
		t.Fatal(err)
	} else if pemFile, _ := os.ReadFile(files.CACert); !bytes.Equal(pemFile, a.CertPEM()) {
		t.Error("Ensure and LoadAuthority keep different CAs")
	}
}

func TestParseAuthorityIssuesForTheSameCA(t *testing.T) {
	a, err := LoadAuthority(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := a.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseAuthority(a.CertPEM(), key, nil)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(a.CertPEM())
	c, err := b.Leaf("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: "api.example.com", Roots: roots}); err != nil {
		t.Errorf("a leaf of the parsed CA: %v", err)
	}
	other, _ := LoadAuthority(t.TempDir(), nil)
	if _, err := ParseAuthority(a.CertPEM(), must(other.KeyPEM()), nil); err == nil {
		t.Error("took a key that is not the certificate's")
	}
	if _, err := ParseAuthority(c.Certificate[0], key, nil); err == nil {
		t.Error("took a certificate that is not PEM")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
