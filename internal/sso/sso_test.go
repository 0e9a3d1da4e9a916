package sso

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestIdentityFromClaims(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		claims map[string]any
		want   Identity
	}{
		{"groups list with a prefix", Config{TeamClaim: "groups", TeamPrefix: "warren-", OperatorClaim: "groups", OperatorValue: "warren-operators"},
			map[string]any{"email": "a@x", "groups": []any{"warren-acme", "staff", "warren-", "warren-operators", 7}},
			Identity{Subject: "s", Name: "a@x", Teams: []string{"acme", "operators"}, Operator: true}},
		{"a string claim, no prefix", Config{TeamClaim: "hd"},
			map[string]any{"name": "Ann", "hd": "example.com"},
			Identity{Subject: "s", Name: "Ann", Teams: []string{"example.com"}}},
		{"operator by email", Config{TeamClaim: "groups", OperatorClaim: "email", OperatorValue: "root@x"},
			map[string]any{"email": "root@x"},
			Identity{Subject: "s", Name: "root@x", Operator: true}},
		{"no claims", Config{TeamClaim: "groups", OperatorClaim: "groups", OperatorValue: "ops"},
			map[string]any{"groups": map[string]any{"ops": true}},
			Identity{Subject: "s", Name: "s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := (&Provider{cfg: tc.cfg}).identity("s", tc.claims)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("identity (-want +got):\n%s", d)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Issuer: "https://idp.example", ClientID: "c", TeamClaim: "groups"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Config{
		"no issuer":           {ClientID: "c", TeamClaim: "groups"},
		"issuer not a URL":    {Issuer: "idp.example", ClientID: "c", TeamClaim: "groups"},
		"no client":           {Issuer: "https://idp.example", TeamClaim: "groups"},
		"no team claim":       {Issuer: "https://idp.example", ClientID: "c"},
		"operator claim only": {Issuer: "https://idp.example", ClientID: "c", TeamClaim: "groups", OperatorClaim: "groups"},
	} {
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
