package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/internal/store/sqlite"
)

// TestOpenSecrets: the key and the issuer's keys are made in the state
// dir; the issuer is the API URL unless OIDCIssuer names one; a given key
// file must exist and hold a key.
func TestOpenSecrets(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := Config{StateDir: dir}
	_, iss, err := openSecrets(cfg, st, "http://127.0.0.1:3000", nil, nil)
	if err != nil || iss.URL() != "http://127.0.0.1:3000" {
		t.Fatalf("default issuer: %v, %v", iss, err)
	}
	for _, f := range []string{"secrets.key", "oidc-keys.json"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", f, fi, err)
		}
	}
	cfg.OIDCIssuer = "https://warren.example.com"
	if _, iss, err := openSecrets(cfg, st, "http://127.0.0.1:3000", nil, nil); err != nil || iss.URL() != cfg.OIDCIssuer {
		t.Errorf("OIDCIssuer: %v, %v", iss, err)
	}
	cfg.SecretsKeyFile = filepath.Join(dir, "missing.key")
	if _, _, err := openSecrets(cfg, st, "", nil, nil); err == nil {
		t.Error("a missing SecretsKeyFile is no error")
	}
}
