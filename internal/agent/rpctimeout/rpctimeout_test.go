package rpctimeout

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestUnbounded(t *testing.T) {
	tests := []struct {
		name, in string
		want     string
	}{
		{"zero is dropped", "0", ""},
		{"positive is kept", "1500", "1500"},
		{"absent stays absent", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			h := Unbounded(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				got = r.Header.Get("Connect-Timeout-Ms")
			}))
			r := httptest.NewRequest("POST", "/process.Process/Start", nil)
			if tt.in != "" {
				r.Header.Set("Connect-Timeout-Ms", tt.in)
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			if got != tt.want {
				t.Errorf("Connect-Timeout-Ms = %q, want %q", got, tt.want)
			}
		})
	}
}
