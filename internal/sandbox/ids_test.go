package sandbox

import (
	"regexp"
	"strings"
	"testing"
)

func TestValidAPIKey(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		want      bool
	}{
		{"issued", NewAPIKey(), true},
		{"one digit", "e2b_a", true},
		{"odd length", "e2b_abc", true},
		{"longest", "e2b_" + strings.Repeat("f", maxAPIKeyHex), true},
		{"too long", "e2b_" + strings.Repeat("f", maxAPIKeyHex+1), false},
		{"uppercase hex", "e2b_ABCDEF", false},
		{"mixed case", "e2b_abCd", false},
		{"not hex", "e2b_xyz", false},
		{"no digits", "e2b_", false},
		{"empty", "", false},
		{"uppercase prefix", "E2B_abcd", false},
		{"CLI token", "sk_e2b_abcd", false},
		{"space", "e2b_ab cd", false},
		{"trailing newline", "e2b_abcd\n", false},
		{"non-ASCII", "e2b_ab\u00e9", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidAPIKey(tc.key); got != tc.want {
				t.Errorf("ValidAPIKey(%q) = %v, want %v", tc.key, got, tc.want)
			}
		})
	}
}

// FuzzValidAPIKey checks ValidAPIKey against the pattern SDK 2.30-2.45
// enforce, bounded in length.
func FuzzValidAPIKey(f *testing.F) {
	want := regexp.MustCompile(`^e2b_[0-9a-f]{1,128}$`)
	for _, k := range []string{"e2b_ab", "e2b_ABC", "e2b_abc", "e2b_", "sk_e2b_1", "e2b_0\n"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if got := ValidAPIKey(key); got != want.MatchString(key) {
			t.Errorf("ValidAPIKey(%q) = %v, the SDK's pattern says %v", key, got, !got)
		}
	})
}
