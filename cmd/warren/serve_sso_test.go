package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sso"
)

func TestParseServeSSO(t *testing.T) {
	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
		return map[string]string{"WARREN_SSO_CLIENT_ID": "warren"}[k]
	}}
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("s3cret\n"), 0o600)
	cfg, err := m.parseServe([]string{"--sso-issuer", "https://idp.example/dex", "--sso-client-secret-file", secret,
		"--sso-scopes", "openid, email,groups", "--sso-team-prefix", "warren-", "--sso-operator-claim", "groups", "--sso-operator-value", "ops"})
	if err != nil {
		t.Fatal(err)
	}
	want := sso.Config{Issuer: "https://idp.example/dex", ClientID: "warren", ClientSecret: "s3cret", Scopes: []string{"openid", "email", "groups"},
		TeamClaim: "groups", TeamPrefix: "warren-", OperatorClaim: "groups", OperatorValue: "ops"}
	if d := cmp.Diff(want, cfg.SSO); d != "" {
		t.Errorf("sso config (-want +got):\n%s", d)
	}
	bare := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	if cfg, err := bare.parseServe(nil); err != nil || cfg.SSO.Issuer != "" {
		t.Errorf("no --sso-issuer: %+v, %v; want no single sign-on", cfg.SSO, err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	for name, args := range map[string][]string{
		"flags without an issuer": {"--sso-operator-claim", "groups"},
		"issuer without a client": {"--sso-issuer", "https://idp.example", "--sso-client-id", ""},
		"missing secret file":     {"--sso-issuer", "https://idp.example", "--sso-client-secret-file", filepath.Join(t.TempDir(), "none")},
		"empty secret file":       {"--sso-issuer", "https://idp.example", "--sso-client-secret-file", empty},
		"operator claim alone":    {"--sso-issuer", "https://idp.example", "--sso-operator-claim", "groups"},
	} {
		if _, err := m.parseServe(args); !errors.As(err, new(usageError)) {
			t.Errorf("%s: err %v, want a usage error", name, err)
		}
	}
}
