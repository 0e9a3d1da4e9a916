package main

import (
	"errors"
	"io"
	"testing"
)

// A bad --oidc-issuer is a usage error (internal/server tests what a
// good one does).
func TestParseServeOIDCIssuer(t *testing.T) {
	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	for _, bad := range []string{"ftp://x", "warren.example.com", "https://x/?a=b"} {
		if _, err := m.parseServe([]string{"--oidc-issuer", bad}); !errors.As(err, new(usageError)) {
			t.Errorf("--oidc-issuer %s: %v, want a usage error", bad, err)
		}
	}
}
