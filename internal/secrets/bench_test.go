package secrets

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/internal/identity"
	"github.com/warrenhq/warren/internal/sandbox"
)

// BenchmarkExpand measures what the egress gateway adds per header value:
// none (no placeholder), a secret (a store read and AES-GCM), a workload
// token (a sandbox read and an ES256 signature).
func BenchmarkExpand(b *testing.B) {
	f := newFixture(b)
	iss, err := identity.New(identity.Config{Issuer: "https://warren.test", KeyFile: filepath.Join(b.TempDir(), "keys.json")})
	if err != nil {
		b.Fatal(err)
	}
	opt := f.stOpt
	opt.Tokens = iss
	svc, err := New(opt)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	svc.Create(ctx, "default", "k", "sk-0123456789abcdef0123456789abcdef", nil)
	f.st.PutSandbox(ctx, sandbox.Sandbox{ID: "isb", TeamID: "default", State: sandbox.StateRunning,
		IAM: sandbox.IAM{Tokens: map[string]sandbox.IAMToken{"aws": {Audience: "sts.amazonaws.com", TokenType: sandbox.TokenTypeJWTSVID}}}})
	for _, c := range []struct{ name, value string }{
		{"plain", "Bearer abc"},
		{"secret", "Bearer ${e2b.secrets.k}"},
		{"token", "${e2b.identity.tokens.aws}"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := svc.Expand(ctx, "isb", "default", c.value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
