package main

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMergeDaemonConfig(t *testing.T) {
	entry := map[string]any{"path": "/opt/runsc", "runtimeArgs": []any{"--overlay2=none", "--allow-suid"}}
	for _, tc := range []struct {
		name        string
		old         string
		want        map[string]any
		wantChanged bool
		wantErr     bool
	}{
		{"no file", "", map[string]any{"experimental": true, "runtimes": map[string]any{"runsc": entry}}, true, false},
		{"keeps other settings and runtimes", `{"log-level":"warn","experimental":false,"runtimes":{"kata":{"path":"/k"}}}`,
			map[string]any{"log-level": "warn", "experimental": true, "runtimes": map[string]any{"kata": map[string]any{"path": "/k"}, "runsc": entry}}, true, false},
		{"replaces an old runsc entry", `{"runtimes":{"runsc":{"path":"/old"}}}`,
			map[string]any{"experimental": true, "runtimes": map[string]any{"runsc": entry}}, true, false},
		{"already set", `{"experimental":true,"runtimes":{"runsc":{"path":"/opt/runsc","runtimeArgs":["--overlay2=none","--allow-suid"]}}}`,
			map[string]any{"experimental": true, "runtimes": map[string]any{"runsc": entry}}, false, false},
		{"invalid JSON is left alone", `{"experimental":`, nil, false, true},
		{"runtimes not an object", `{"runtimes":[]}`, nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, changed, err := mergeDaemonConfig([]byte(tc.old), "runsc", "/opt/runsc", runscArgs)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			var got map[string]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("daemon.json (-want +got):\n%s", diff)
			}
		})
	}
}
