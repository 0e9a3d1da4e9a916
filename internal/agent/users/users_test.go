package users

import (
	"encoding/base64"
	"net/http"
	"testing"
)

func TestForRequest(t *testing.T) {
	basic := func(name string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(name+":"))
	}
	tests := []struct {
		name, auth, defaultUser string
		want                    string // "" means an error
	}{
		{"named in basic auth", basic("root"), "nobody-here", "root"},
		{"default when none named", "", "root", "root"},
		{"other schemes are ignored", "Bearer abc", "root", "root"},
		{"unknown user", basic("no-such-user-xyz"), "root", ""},
		{"unknown default", "", "no-such-user-xyz", ""},
		{"malformed basic auth", "Basic %%%", "root", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.auth != "" {
				h.Set("Authorization", tt.auth)
			}
			u, err := ForRequest(h, tt.defaultUser)
			switch {
			case tt.want == "" && err == nil:
				t.Fatalf("ForRequest = %q, want an error", u.Name)
			case tt.want != "" && err != nil:
				t.Fatalf("ForRequest: %v", err)
			case tt.want != "" && u.Name != tt.want:
				t.Errorf("ForRequest = %q, want %q", u.Name, tt.want)
			}
		})
	}
}
