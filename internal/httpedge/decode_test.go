package httpedge

import (
	"strings"
	"testing"
)

func TestJSONPath(t *testing.T) {
	body := `{"a":{"b":[1,{"c":"x"}],"d":true},"e":[[],[null]]}`
	for _, tc := range []struct {
		value string // its first occurrence in body
		want  string
	}{
		{`{"a"`, ""},
		{`{"b"`, "a"},
		{`[1`, "a.b"},
		{`1`, "a.b[0]"},
		{`{"c"`, "a.b[1]"},
		{`"x"`, "a.b[1].c"},
		{`true`, "a.d"},
		{`[[]`, "e"},
		{`[],`, "e[0]"},
		{`[null`, "e[1]"},
		{`null`, "e[1][0]"},
	} {
		i := strings.Index(body, tc.value)
		end := i + len(tc.value)
		if strings.HasPrefix(tc.value, "{") || strings.HasPrefix(tc.value, "[") {
			end = i + 1 // encoding/json reports a container at its opening
		}
		if got, ok := jsonPath([]byte(body), int64(end)); !ok || got != tc.want {
			t.Errorf("path of %s = %q, %v; want %q", tc.value, got, ok, tc.want)
		}
	}
}
