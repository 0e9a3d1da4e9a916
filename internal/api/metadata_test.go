package api

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMetadataQuery(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
		ok   bool
	}{
		{"", nil, true},
		{"a=1", map[string]string{"a": "1"}, true},
		{"a%3D1%26b%3D2", map[string]string{"a": "1", "b": "2"}, true},
		{url.PathEscape(url.Values{"k y": {"v&=+"}}.Encode()), map[string]string{"k y": "v&=+"}, true},
		{"a", nil, false},
		{"a=1=2", nil, false},
		{"=1", nil, false},
		{"a=%zz", nil, false},
		{"%", nil, false},
	} {
		got, err := parseMetadataQuery(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%q: err = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.in, diff)
		}
	}
}

// FuzzParseMetadataQuery checks that the parser never panics and that
// whatever the SDK's encoding of a map produces decodes to that map.
func FuzzParseMetadataQuery(f *testing.F) {
	f.Add("k", "v", "a=1%26b")
	f.Add("user id", "x&y=z", "%")
	f.Fuzz(func(t *testing.T, k, v, raw string) {
		parseMetadataQuery(raw) // must not panic
		if k == "" {
			return
		}
		enc := url.PathEscape(url.Values{k: {v}}.Encode())
		got, err := parseMetadataQuery(enc)
		if err != nil {
			t.Fatalf("encoded %q=%q as %q: %v", k, v, enc, err)
		}
		if diff := cmp.Diff(map[string]string{k: v}, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	})
}
