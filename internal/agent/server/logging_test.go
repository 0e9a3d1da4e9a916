package server

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/agent/state"
	"github.com/warrenhq/warren/proto/filesystem/filesystemconnect"
	"github.com/warrenhq/warren/proto/process/processconnect"
)

// TestPolledRequestsNotLogged checks that the server's polls (health while
// a sandbox starts, metrics every few seconds while it runs) stay out of
// the agent's log at its default level, which the sandbox's log shows,
// while other requests are logged.
func TestPolledRequestsNotLogged(t *testing.T) {
	var logs bytes.Buffer
	srv := New(Config{
		State:      state.New(),
		Log:        slog.New(slog.NewTextHandler(&logs, nil)),
		Process:    processconnect.UnimplementedProcessHandler{},
		Filesystem: filesystemconnect.UnimplementedFilesystemHandler{},
		Files:      http.NotFoundHandler(),
	})
	t.Cleanup(func() { srv.Close() })
	for _, path := range []string{"/health", "/metrics", "/envs"} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code >= 300 {
			t.Fatalf("GET %s: %d", path, rec.Code)
		}
	}
	got := logs.String()
	if strings.Count(got, "msg=request") != 1 || !strings.Contains(got, "path=/envs") {
		t.Errorf("log = %q, want only the GET /envs line", got)
	}
}
